// Comparison, logical and selection kernels (ops/compare.cpp defines the ops); the backend folder
// provides them. Operands arrive as the dispatcher hands them: compared and selected operands share
// a dtype, logical operands and conditions are bool, out allocated; broadcasting is the loops'
// business.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// out (bool) = in[0] op in[1], elementwise with broadcasting.
void eq(const KernelArgs& k);
void ne(const KernelArgs& k);
void lt(const KernelArgs& k);
void le(const KernelArgs& k);
void gt(const KernelArgs& k);
void ge(const KernelArgs& k);
// out (bool) = in[0] == 0, any input dtype.
void logical_not(const KernelArgs& k);
// out (bool) = in[0] & in[1], in[0] | in[1] over bool operands, with broadcasting.
void logical_and(const KernelArgs& k);
void logical_or(const KernelArgs& k);
// in: cond (bool), a, b   out = cond ? a : b, the three broadcast together.
void where(const KernelArgs& k);
// in: x, mask (bool, broadcasting to x)   out = mask ? attrs "value" (converted to x's dtype) : x.
void masked_fill(const KernelArgs& k);

}  // namespace terra::kernels
