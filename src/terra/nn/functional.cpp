#include "terra/nn/functional.h"

#include <cmath>
#include <stdexcept>

#include "terra/ops/arithmetic.h"
#include "terra/ops/attention.h"
#include "terra/ops/conv.h"
#include "terra/ops/creation.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/indexing.h"
#include "terra/ops/linalg.h"
#include "terra/ops/linear.h"
#include "terra/ops/loss.h"
#include "terra/ops/norm.h"
#include "terra/ops/pool.h"
#include "terra/ops/random_ops.h"
#include "terra/ops/softmax.h"

namespace terra::nn::functional {

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { return terra::linear(x, w, b); }
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t padding, int64_t dilation,
              int64_t groups) {
  return terra::conv2d(x, w, b, {stride, stride}, {padding, padding}, {dilation, dilation}, groups);
}

Tensor relu(const Tensor& x) { return terra::relu(x); }
Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (approximate != "none" && approximate != "tanh")
    throw std::invalid_argument("[nn::functional::gelu] approximate must be \"none\" or \"tanh\", got \"" +
                                approximate + "\"");
  return terra::gelu(x, approximate == "tanh");
}
Tensor tanh(const Tensor& x) { return terra::tanh(x); }
Tensor sigmoid(const Tensor& x) { return terra::sigmoid(x); }
Tensor softmax(const Tensor& x, int64_t dim) { return terra::softmax(x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return terra::log_softmax(x, dim); }

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, const std::string& reduction) {
  return terra::cross_entropy(logits, targets, ignore_index, reduction);
}
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, const std::string& reduction) {
  return terra::nll_loss(log_probs, targets, ignore_index, reduction);
}
Tensor mse_loss(const Tensor& a, const Tensor& b, const std::string& reduction) {
  return terra::mse_loss(a, b, reduction);
}
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, const std::string& reduction) {
  return terra::binary_cross_entropy_with_logits(logits, targets, reduction);
}

Tensor dropout(const Tensor& x, double p, bool training) { return terra::dropout(x, p, training); }
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  return terra::max_pool2d(x, kernel, stride == 0 ? kernel : stride, padding);
}
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  return terra::avg_pool2d(x, kernel, stride == 0 ? kernel : stride, padding);
}
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t output_h, int64_t output_w) {
  return terra::adaptive_avg_pool2d(x, {output_h, output_w});
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return terra::layer_norm(x, normalized_shape, weight, bias, eps);
}
Tensor embedding(const Tensor& indices, const Tensor& weight) { return terra::embedding(weight, indices); }

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, bool training) {
  // Without dropout: the fused op (one kernel forward, one backward, in every mode).
  if (!(dropout_p > 0.0 && training)) return terra::scaled_dot_product_attention(q, k, v, attn_mask, is_causal);
  // Dropout draws a number per weight: composed from the ops, the same masking as the fused op.
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2 || q.shape().back() != k.shape().back())
    throw std::invalid_argument("[nn::functional::scaled_dot_product_attention] q " + shape_str(q.shape()) + " and k " +
                                shape_str(k.shape()) + " must be [..., S, D] with the same D");
  const int64_t D = q.shape().back(), Sq = q.shape()[q.dim() - 2], Sk = k.shape()[k.dim() - 2];
  // Scale q before the product, as torch does (fewer elements than the scores when Sq <= Sk).
  Tensor scores = terra::matmul(q * (1.0 / std::sqrt(double(D))), k.transpose(-2, -1));
  if (is_causal)  // key j is masked for query i when j > i (top-left aligned when Sq != Sk)
    scores = masked_fill(scores, gt(arange(Sk).unsqueeze(0), arange(Sq).unsqueeze(1)), -INFINITY);
  if (attn_mask.defined())
    scores = attn_mask.dtype() == DType::Bool ? masked_fill(scores, attn_mask, -INFINITY) : scores + attn_mask;
  Tensor w = terra::dropout(terra::softmax(scores, -1), dropout_p, true);
  return terra::matmul(w, v);
}

}  // namespace terra::nn::functional
