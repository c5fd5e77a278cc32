// Matrix-product kernels; the backend folder linked in provides them.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

void matmul(const KernelArgs& k);  // out[...,m,n] = in0[...,m,k] @ in1[...,k,n], batch broadcast
// in: x [..., k] (rank >= 2), w [n, k], b [n]; out [..., n] = matmul(x, w^T) + b (relu'd if asked)
// with the bits of the separate kernels: the bias (and relu) follow each output block's GEMM.
void linear(const KernelArgs& k, bool relu);

}  // namespace terra::kernels
