// nn::functional: stateless forms of the layers (torch.nn.functional), thin wrappers over the ops.
#pragma once
#include <cstdint>
#include <string>

#include "terra/core/shape.h"
#include "terra/core/tensor.h"

namespace terra::nn::functional {

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});  // x @ w^T + b
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, int64_t stride = 1, int64_t padding = 0,
              int64_t dilation = 1, int64_t groups = 1);

Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

Tensor cross_entropy(const Tensor& logits, const Tensor& int64_targets, int64_t ignore_index = -100,
                     const std::string& reduction = "mean");
Tensor nll_loss(const Tensor& log_probs, const Tensor& int64_targets, int64_t ignore_index = -100,
                const std::string& reduction = "mean");
Tensor mse_loss(const Tensor& a, const Tensor& b, const std::string& reduction = "mean");
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        const std::string& reduction = "mean");

Tensor dropout(const Tensor& x, double p, bool training);
// stride 0 means stride = kernel (torch's default).
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t output_h, int64_t output_w);

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
Tensor embedding(const Tensor& indices, const Tensor& weight);  // torch's argument order

// q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] -> [..., Sq, Dv]: softmax(q k^T / sqrt(D) + mask) v.
// attn_mask broadcasts to [..., Sq, Sk]: bool (true = may NOT attend) or float (added). is_causal
// masks key j for query i when j > i. Dropout on the weights only when training. Without active
// dropout this is the fused op terra::scaled_dot_product_attention (ops/attention.h).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = {},
                                    double dropout_p = 0.0, bool is_causal = false, bool training = true);

}  // namespace terra::nn::functional
