#include "terra/nn/attention.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/nn/functional.h"
#include "terra/nn/init.h"
#include "terra/nn/linear.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/creation.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/linear.h"
#include "terra/ops/views.h"

namespace terra::nn {

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, double p, bool with_bias)
    : embed_dim(e), num_heads(h), head_dim(h > 0 ? e / h : 0), dropout(p) {
  if (e <= 0 || h <= 0 || e % h != 0)
    throw std::invalid_argument("[nn::MultiheadAttention] embed_dim " + std::to_string(e) +
                                " must be positive and divisible by num_heads " + std::to_string(h));
  if (!(p >= 0.0 && p <= 1.0))
    throw std::invalid_argument("[nn::MultiheadAttention] dropout must be in [0, 1], got " + std::to_string(p));
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
  if (with_bias) in_proj_bias = register_parameter("in_proj_bias", empty({3 * e}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, with_bias));
  out_proj_weight = out_proj->weight;
  out_proj_bias = out_proj->bias;
  reset_parameters();
}

// torch: xavier_uniform_ in_proj, default Linear init for out_proj, all biases zero.
void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  init::kaiming_uniform_(out_proj_weight, std::sqrt(5.0));
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj_bias.defined()) init::zeros_(out_proj_bias);
}

Tensor MultiheadAttention::causal_mask(int64_t size) {
  Tensor idx = arange(size);
  return gt(idx.unsqueeze(0), idx.unsqueeze(1));  // [i][j] = j > i
}

Tensor MultiheadAttention::forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                   const Tensor& key_padding_mask) {
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument("[nn::MultiheadAttention] " + what + " (query " + shape_str(q.shape()) + ", key " +
                                shape_str(k.shape()) + ", value " + shape_str(v.shape()) + ", embed_dim " +
                                std::to_string(embed_dim) + ")");
  };
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3) fail("expected 3-D [batch, seq, embed] inputs");
  const int64_t B = q.shape()[0], Sq = q.shape()[1], Sk = k.shape()[1];
  if (q.shape()[2] != embed_dim || k.shape()[2] != embed_dim || v.shape()[2] != embed_dim)
    fail("last dim must equal embed_dim");
  if (k.shape()[0] != B || v.shape()[0] != B || v.shape()[1] != Sk) fail("batch or key/value lengths differ");

  const int64_t E = embed_dim, H = num_heads, D = head_dim;
  Tensor Q, K, V;  // [B, H, S, D]
  auto heads = [&](const Tensor& t, int64_t S) { return t.reshape({B, S, H, D}).transpose(1, 2); };
  if (q.same(k) && k.same(v)) {
    // Self-attention: one projection for q, k and v together.
    Tensor qkv = terra::linear(q, in_proj_weight, in_proj_bias).reshape({B, Sq, 3, H, D}).permute({2, 0, 3, 1, 4});
    Q = qkv.select(0, 0);
    K = qkv.select(0, 1);
    V = qkv.select(0, 2);
  } else {
    auto part = [&](const Tensor& t, int64_t i) {
      Tensor b = in_proj_bias.defined() ? in_proj_bias.slice(0, i * E, (i + 1) * E) : Tensor();
      return terra::linear(t, in_proj_weight.slice(0, i * E, (i + 1) * E), b);
    };
    Q = heads(part(q, 0), Sq);
    K = heads(part(k, 1), Sk);
    V = heads(part(v, 2), Sk);
  }

  Tensor mask = attn_mask;
  if (mask.defined()) {
    if (mask.dim() == 3) {
      if (mask.shape() != Shape{B * H, Sq, Sk}) fail("3-D attn_mask must be [batch * num_heads, Sq, Sk], got " +
                                                     shape_str(mask.shape()));
      mask = mask.reshape({B, H, Sq, Sk});
    } else if (mask.dim() != 2 || mask.shape() != Shape{Sq, Sk}) {
      fail("attn_mask must be [Sq, Sk] or [batch * num_heads, Sq, Sk], got " + shape_str(mask.shape()));
    }
  }
  if (key_padding_mask.defined()) {
    if (key_padding_mask.shape() != Shape{B, Sk} || key_padding_mask.dtype() != DType::Bool)
      fail("key_padding_mask must be bool [batch, Sk], got " + shape_str(key_padding_mask.shape()));
    Tensor kpm = key_padding_mask.reshape({B, 1, 1, Sk});
    if (!mask.defined()) mask = kpm;
    else if (mask.dtype() == DType::Bool) mask = logical_or(mask, kpm);
    else mask = masked_fill(mask, kpm, -INFINITY);
  }
  Tensor out = functional::scaled_dot_product_attention(Q, K, V, mask, dropout, false, is_training());
  out = out.transpose(1, 2).reshape({B, Sq, E});
  return terra::linear(out, out_proj_weight, out_proj_bias);
}

}  // namespace terra::nn
