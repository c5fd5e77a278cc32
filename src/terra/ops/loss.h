// Losses: cross entropy / negative log-likelihood over class indices, mean squared error, and
// binary cross entropy on logits. reduction is "mean" (default), "sum" or "none", as torch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "terra/core/tensor.h"

namespace terra {

// logits [N, C] or [N, C, d1, ...] (or [C] with a 0-d target); targets int64 [N, d1, ...].
// One fused op (log_softmax + nll in one pass per row), differentiable twice.
// "mean" averages over the targets that are not ignore_index (NaN when all are ignored, as torch).
// A class index outside [0, C) throws std::invalid_argument when the kernel reads it.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     std::string reduction = "mean");
// The fused op's two outputs: {loss, per-row logsumexp [targets' shape]} (the lse is what the
// backward reads; exposed for tests and double backward).
std::vector<Tensor> cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                                          std::string reduction = "mean");
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index = -100,
                std::string reduction = "mean");
Tensor mse_loss(const Tensor& a, const Tensor& b, std::string reduction = "mean");
// max(x, 0) - x * t + log(1 + exp(-|x|)): no overflow for large |x|. targets have logits' shape.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        std::string reduction = "mean");

// Backward ops (registered; used by the gradients above, exposed for double backward and tests).
// reduction: 0 none, 1 mean, 2 sum.
Tensor nll_loss_backward(const Tensor& grad, const Tensor& targets, const Shape& log_probs_shape,
                         int64_t ignore_index, int64_t reduction);
Tensor binary_cross_entropy_with_logits_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets);
// cross_entropy's gradient (ops/cross_entropy.cpp): (softmax(logits) - onehot) * grad (/ used for
// mean) in one pass, from the per-row logsumexp `lse` [targets' shape] the forward saved.
Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                              int64_t ignore_index, int64_t reduction);

}  // namespace terra
