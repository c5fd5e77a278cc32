// Multi-head attention (torch.nn.MultiheadAttention with batch_first = true).
#pragma once
#include <cstdint>

#include <memory>

#include "terra/nn/linear.h"
#include "terra/nn/module.h"

namespace terra::nn {

// Parameters as torch names them: in_proj_weight [3E, E], in_proj_bias [3E], then the owned child
// out_proj (a Linear: out_proj.weight [E, E], out_proj.bias [E]); owning it keeps this module movable.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true);

  // query [B, Sq, E], key/value [B, Sk, E] -> [B, Sq, E].
  // attn_mask: [Sq, Sk] or [B * num_heads, Sq, Sk]; bool (true = may NOT attend, as torch) or
  // float (added to the scores). key_padding_mask: bool [B, Sk], true = padding (ignored key).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = {},
                 const Tensor& key_padding_mask = {});
  // Self-attention without a mask.
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }
  using Module::operator();
  Tensor operator()(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = {},
                    const Tensor& key_padding_mask = {}) {
    return forward(q, k, v, attn_mask, key_padding_mask);
  }
  std::string name() const override { return "MultiheadAttention"; }
  void reset_parameters();

  // Bool [size, size], true above the diagonal: position i may attend to positions <= i.
  static Tensor causal_mask(int64_t size);

  int64_t embed_dim, num_heads, head_dim;
  double dropout;
  Tensor in_proj_weight, in_proj_bias;  // in_proj_bias undefined without bias
  std::shared_ptr<Linear> out_proj;
  Tensor out_proj_weight, out_proj_bias;  // handles to out_proj's parameters
};

}  // namespace terra::nn
