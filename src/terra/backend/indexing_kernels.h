// Indexing kernels (ops/indexing.cpp defines the ops); the backend folder provides them. Index
// inputs are int64. Each kernel that reads indices range-checks them first with its check_values
// hook (*_values, also run by dispatch on host data): `[op] index V is out of range for ... of size N`.
#pragma once
#include <span>

#include "terra/core/op.h"

namespace terra::kernels {

// cat: out[0] is in[0..n) laid end to end along attrs "dim" (same dtype, same sizes elsewhere).
void cat(const KernelArgs& k);
// index_select: in: x, index (1-D)   out[..., j, ...] = x[..., index[j], ...] along attrs "dim".
void index_select(const KernelArgs& k);
void index_select_values(std::span<const Tensor> in, const Attrs& a);
// index_select_backward: in: grad, index   out: zeros of attrs "shape", grad rows added at index
// along attrs "dim" (repeated indices accumulate).
void index_select_backward(const KernelArgs& k);
void index_select_backward_values(std::span<const Tensor> in, const Attrs& a);
// gather: in: x, index   out (index's shape) takes x at index along attrs "dim", at its own
// position elsewhere.
void gather(const KernelArgs& k);
void gather_values(std::span<const Tensor> in, const Attrs& a);
// gather_backward: in: grad, index   out: zeros of attrs "shape" with grad scatter-added where
// gather read (serially: repeated indices accumulate in order).
void gather_backward(const KernelArgs& k);
void gather_backward_values(std::span<const Tensor> in, const Attrs& a);
// embedding: in: weight [num, d], indices   out [..., d]: weight's rows at indices (zeros at
// attrs "padding_idx" when attrs "mask_padding").
void embedding(const KernelArgs& k);
void embedding_values(std::span<const Tensor> in, const Attrs& a);
// embedding_backward: in: grad [..., d], indices   out [attrs "num", d]: grad rows summed by
// index, skipping attrs "padding_idx".
void embedding_backward(const KernelArgs& k);
void embedding_backward_values(std::span<const Tensor> in, const Attrs& a);

}  // namespace terra::kernels
