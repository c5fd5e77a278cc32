// Views (share storage with their input) and the copies that make data contiguous or cast it.
#pragma once
#include <vector>

#include "terra/core/tensor.h"

namespace terra {

Tensor reshape(const Tensor& x, Shape shape);  // a view when strides allow, else a copy
Tensor view(const Tensor& x, Shape shape);     // always a view; throws when strides do not allow
Tensor permute(const Tensor& x, std::vector<int64_t> dims);
Tensor transpose(const Tensor& x, int64_t a, int64_t b);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor expand(const Tensor& x, Shape shape);  // -1 keeps a dim
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start = 0, int64_t end = -1);
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);

}  // namespace terra
