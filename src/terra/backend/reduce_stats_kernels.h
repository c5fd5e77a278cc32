// Statistics kernels: max/min, argmax/argmin and var (ops/reduce_stats.cpp defines the ops); the
// backend folder provides them. A NaN counts as the extreme element (the first one), as torch.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// in: x (not empty)   out: [] its largest (smallest) element.
void max_all(const KernelArgs& k);
void min_all(const KernelArgs& k);
// in: x   out: the values and the int64 indices of the first extreme elements along attrs "dim".
void max_dim(const KernelArgs& k);
void min_dim(const KernelArgs& k);
// in: x   out: the int64 indices of the first extreme elements along attrs "dim".
void argmax(const KernelArgs& k);
void argmin(const KernelArgs& k);
// in: x (floating)   out: its variance over attrs "dims", divided by n - 1 when attrs "unbiased" (else n).
void var(const KernelArgs& k);

}  // namespace terra::kernels
