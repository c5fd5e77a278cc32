// Softmax kernels (ops/softmax.cpp defines the ops); the backend folder provides them. Floating
// dtypes only; attrs "dim" (normalized, 0 for a 0-d tensor) is the dim the rows run along, and the
// inputs may be strided.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// in: x   out: exp(x - max) / sum(exp(x - max)) per row.
void softmax(const KernelArgs& k);
// in: x   out: x - logsumexp(x) per row.
void log_softmax(const KernelArgs& k);
// in: grad, y (softmax's output)   out: y * (grad - sum(grad * y)) per row.
void softmax_backward(const KernelArgs& k);
// in: grad, y (log_softmax's output)   out: grad - exp(y) * sum(grad) per row.
void log_softmax_backward(const KernelArgs& k);

}  // namespace terra::kernels
