// Joining (cat, stack), splitting (split, chunk: views), and integer indexing (index_select,
// gather, embedding) with their scatter-add backward ops.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "terra/core/tensor.h"

namespace terra {

// Inputs agree on every dim but `dim`; dtypes are promoted (torch's rule). 1-D empty inputs are
// skipped, as torch's legacy rule.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
// Equal shapes; a new dim at `dim`.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Slices (views) of `x`, torch semantics: pieces of split_size, the last one smaller.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// out = x with dim `dim` indexed by the int64 1-D `index` (values in [0, size)).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1; index has x's rank and is no larger off `dim`.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// weight [num, dim], indices int64 of any shape -> indices.shape + [dim]. Rows at padding_idx get
// no gradient (a negative padding_idx counts from the end, as torch).
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);

// Backward ops: scatter-add `grad` into zeros of the input's shape (registered, one pass).
Tensor index_select_backward(const Tensor& grad, const Shape& in_shape, int64_t dim, const Tensor& index);
Tensor gather_backward(const Tensor& grad, const Shape& in_shape, int64_t dim, const Tensor& index);
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num, int64_t padding_idx = -1);

}  // namespace terra
