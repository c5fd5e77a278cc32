// Fully connected layer as a composition of ordinary ops (matmul reads w^T through strides).
#pragma once
#include "terra/core/tensor.h"

namespace terra {

// y = x @ w^T + b for x [..., in] (rank >= 1), w [out, in], b [out] or undefined.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});

}  // namespace terra
