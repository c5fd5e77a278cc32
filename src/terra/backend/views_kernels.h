// Kernels of the view ops' copies (ops/views.cpp defines the ops; views themselves move no data);
// the backend folder provides them.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// copy (contiguous, clone) and cast: out[0] takes in[0]'s elements, converted to out's dtype.
void copy(const KernelArgs& k);
// slice_backward: `out` becomes zeros, then `grad` is copied into `region`, the view of `out` that
// the forward slice took (ops/views.cpp makes it: views are the ops' business).
void slice_backward(const Tensor& grad, Tensor& out, const Tensor& region);

}  // namespace terra::kernels
