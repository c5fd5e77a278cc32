// Matrix products.
#pragma once
#include <vector>

#include "terra/core/op.h"
#include "terra/core/tensor.h"

namespace terra {

// torch.matmul semantics: 1-D operands are promoted and the added dim removed; batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// Gradients {d a, d b} of matmul(a, b) (a, b at least 2-D) for grad_out `go`, summed to the
// operands' shapes: matmul's gradient, and linear's (which must produce the same bits).
TensorList matmul_backward(const Tensor& go, const Tensor& a, const Tensor& b, const Shape& a_shape,
                           const Shape& b_shape);

}  // namespace terra
