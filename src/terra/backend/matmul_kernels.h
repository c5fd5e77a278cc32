// Matrix-product kernels; the backend folder linked in provides them.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

void matmul(const KernelArgs& k);  // out[...,m,n] = in0[...,m,k] @ in1[...,k,n], batch broadcast
// in: x [..., k] (rank >= 2), w [n, k], b [n]; out [..., n] = matmul(x, w^T) + b with the bits of
// the two separate kernels: the bias is added to each output block after its GEMM.
void linear(const KernelArgs& k);

}  // namespace terra::kernels
