// Random ops. Each call reserves a (seed, offset) range from the global generator (random.h);
// element i's numbers come from (key, i) only, so a replay of the call reproduces them bit-exactly.
#pragma once
#include <cstdint>

#include "terra/core/tensor.h"

namespace terra {

Tensor rand(Shape shape, DType dtype = DType::Float32);   // uniform [0, 1)
Tensor randn(Shape shape, DType dtype = DType::Float32);  // standard normal
Tensor randint(int64_t low, int64_t high, Shape shape);   // int64 uniform in [low, high)
// 1 with probability probs[i] (in [0, 1]), else 0; same shape and dtype as probs.
Tensor bernoulli(const Tensor& probs);
Tensor bernoulli(Shape shape, double p, DType dtype = DType::Float32);
// Inverted dropout: zeroes elements with probability p and scales the rest by 1 / (1 - p).
// One random op draws the mask, then mul: the backward multiplies by that same mask.
// training = false or p = 0 returns x itself; p = 1 gives zeros.
Tensor dropout(const Tensor& x, double p, bool training);
// The mask dropout multiplies by: 0 with probability p, else 1 / (1 - p).
Tensor dropout_mask(Shape shape, double p, DType dtype = DType::Float32);

}  // namespace terra
