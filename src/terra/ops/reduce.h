// Reductions over dims (empty dims = all dims).
#pragma once
#include <vector>

#include "terra/core/tensor.h"

namespace terra {

Tensor sum(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
// Sums `x` down to `shape` (the reverse of broadcasting); used by gradients.
Tensor sum_to(const Tensor& x, const Shape& shape);

// Normalizes dims for a reduction: wraps, sorts, rejects duplicates; empty means all dims.
std::vector<int64_t> reduction_dims(const char* op, std::vector<int64_t> dims, int64_t rank);
Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim);

}  // namespace terra
