// float32 exp that the loop vectorizer can inline (glibc's expf is a scalar call), shared by the
// activation kernels and the fused cross-entropy.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

namespace terra::cpu {

// Forced inline: GCC kept vexp as a call (one element at a time, ~14 ns each); inlined, the loops
// vectorize. The same operations in the same order either way (no FMA contraction in ISO C++
// mode): the same bits.
#define TERRA_VECTOR_MATH inline __attribute__((always_inline))
TERRA_VECTOR_MATH float vexp(float x) {
  // exp(x) = 2^n e^r, |r| <= ln2/2; Cephes' polynomial (about 1 ulp).
  float xc = std::min(std::max(x, -86.6f), 88.72f);
  // Round to nearest by the 1.5 * 2^23 trick: no floor or float->int conversion, which GCC will
  // not vectorize under -ftrapping-math.
  float t = xc * 1.44269504088896341f + 12582912.0f;
  int32_t ni = std::bit_cast<int32_t>(t) - 0x4B400000;
  float n = t - 12582912.0f;
  float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^(n-1) * 2 keeps n = 128 representable; below -86.6 the true value is under 2.6e-38.
  float scale = std::bit_cast<float>((ni + 126) << 23);
  float y = p * scale * 2.0f;
  y = x > 88.72f ? std::numeric_limits<float>::infinity() : y;
  y = x < -103.98f ? 0.0f : y;
  return x != x ? x : y;
}

}  // namespace terra::cpu
