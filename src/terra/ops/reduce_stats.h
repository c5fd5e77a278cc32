// Extremes (max/min, argmax/argmin) and statistics (var, std_).
#pragma once
#include <cstdint>
#include <vector>

#include "terra/core/tensor.h"

namespace terra {

// Over all elements (0-d result); the gradient is split evenly among tied maxima, as torch.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// Along one dim; the gradient flows to the first extreme element of each row, as torch.
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
// Int64 indices of the first extreme element (NaN counts as the extreme, as torch).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x);  // index into the flattened tensor
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x);

// Variance over dims (empty = all); unbiased divides by N - 1.
Tensor var(const Tensor& x, std::vector<int64_t> dims = {}, bool unbiased = true, bool keepdim = false);
Tensor std_(const Tensor& x, std::vector<int64_t> dims = {}, bool unbiased = true, bool keepdim = false);

}  // namespace terra
