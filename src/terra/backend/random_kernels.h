// Random kernels (ops/random_ops.cpp defines the ops); the backend folder provides them. Element i
// of out[0] (contiguous) is the i-th number of the op's Philox stream k.rng (core/random.h), so a
// draw does not depend on the threads that computed it.
#pragma once
#include <span>

#include "terra/core/op.h"

namespace terra::kernels {

// rand: uniform in [0, 1) (float32 or float64 draws by out's dtype). randn: standard normal.
void rand(const KernelArgs& k);
void randn(const KernelArgs& k);
// randint: int64 uniform in [low, high) (attrs low, high).
void randint(const KernelArgs& k);
// bernoulli: in: probs (floating)   out: 1 where the uniform draw is below probs[i], else 0.
void bernoulli(const KernelArgs& k);
// Its check_values hook: throws `[bernoulli] probability ... is outside [0, 1]` for the first
// probability outside [0, 1]; the kernel runs it first.
void bernoulli_values(std::span<const Tensor> in, const Attrs& a);
// bernoulli_p: 1 with probability attrs "p", else 0, in out's dtype.
void bernoulli_p(const KernelArgs& k);
// dropout_mask: 0 with probability attrs "p", else 1 / (1 - p) (0 when p is 1).
void dropout_mask(const KernelArgs& k);

}  // namespace terra::kernels
