// Fully connected layer: with a bias, one fused op (GEMM + bias [+ relu]); without, matmul on w^T.
#pragma once
#include "terra/core/tensor.h"

namespace terra {

// y = x @ w^T + b for x [..., in] (rank >= 1), w [out, in], b [out] or undefined.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});
// relu(linear(x, w, b)) with the relu in the GEMM's output pass when b is defined: the same bits
// as the two calls (nn::Sequential uses it for a Linear followed by a ReLU).
Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b = {});

}  // namespace terra
