// Fused scaled-dot-product attention: softmax(q k^T * scale + mask) v as one op (and one backward
// op), so no mode materializes the scores, the masked scores and their gradients as separate ops.
#pragma once
#include <optional>
#include <vector>

#include "terra/core/tensor.h"

namespace terra {

// q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] -> [..., Sq, Dv]; the batch dims broadcast.
// attn_mask broadcasts to [..., Sq, Sk]: bool (true = may NOT attend) or floating (added to the
// scores; it gets a gradient when it requires one). is_causal masks key j for query i when j > i
// (top-left aligned, as torch 2's reference when Sq != Sk); it combines with attn_mask. scale
// defaults to 1/sqrt(D). A query row whose every key is masked gives NaN, as softmax of an all
// -inf row does (torch too). Gradients of the gradients are not provided.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = {},
                                    bool is_causal = false, std::optional<double> scale = std::nullopt);

// The backward op: from the output gradient, q, k, v and the saved softmax weights [..., Sq, Sk],
// returns {dq, dk, dv} over the broadcast batch shape, plus d(scores) [..., Sq, Sk] when
// `scores_grad` (the gradient of an additive mask before it is summed to the mask's shape). No
// gradient reaches a score masked by `bool_mask` (optional) or by is_causal, as through
// masked_fill: a fully masked row (NaN output) gets zero dq and adds nothing to dk (dv is NaN).
std::vector<Tensor> scaled_dot_product_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                                          const Tensor& v, const Tensor& weights, const Tensor& bool_mask,
                                                          bool is_causal, double scale, bool scores_grad);

}  // namespace terra
