// Matrix products.
#pragma once
#include "terra/core/tensor.h"

namespace terra {

// torch.matmul semantics: 1-D operands are promoted and the added dim removed; batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace terra
