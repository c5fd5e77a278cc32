// Softmax and log-softmax along one dim (numerically stable), and their backward ops.
#pragma once
#include <cstdint>

#include "terra/core/tensor.h"

namespace terra {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// Gradients from the saved output y: softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
// Registered ops (one pass over the data instead of four elementwise ops).
Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim);
Tensor log_softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim);

}  // namespace terra
