// Matrix-product kernels; the backend folder linked in provides them.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

void matmul(const KernelArgs& k);  // out[...,m,n] = in0[...,m,k] @ in1[...,k,n], batch broadcast

}  // namespace terra::kernels
