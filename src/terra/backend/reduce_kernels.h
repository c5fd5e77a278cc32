// Reduction kernels (ops/reduce.cpp defines the ops); the backend folder provides them.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// in: x   out: x summed over attrs "dims" (sorted, distinct), in x's dtype when floating (accumulated
// in double) and in int64 otherwise; the output's shape (keepdim or not) is the op's business.
void sum(const KernelArgs& k);

}  // namespace terra::kernels
