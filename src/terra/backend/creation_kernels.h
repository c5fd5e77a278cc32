// Creation kernels (ops/creation.cpp defines the ops); the backend folder provides them. No inputs:
// out[0] arrives allocated contiguous with the shape and dtype the op's inference gave.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// full: every element of out[0] becomes attrs "value" converted to its dtype.
void full(const KernelArgs& k);
// arange: out[0][i] = start + i * step (attrs start, step), computed in wrapping 64-bit arithmetic.
void arange(const KernelArgs& k);
// eye: out[0] [n, m] is zero except ones on the main diagonal.
void eye(const KernelArgs& k);

}  // namespace terra::kernels
