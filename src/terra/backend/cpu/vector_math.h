// float32 math that the loop vectorizer can inline (glibc's expf/tanhf/erff are scalar calls),
// shared by the kernels that need exp/tanh/erf: the same function everywhere, so the same bits.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace terra::cpu {

// float64 keeps <cmath>: it is the precision the gradchecks run in. Forced inline: GCC kept vtanh
// and vexp as calls (one element at a time, ~14 ns each); inlined, the loops vectorize. The same
// operations in the same order either way (the library builds with -ffp-contract=off: no FMA contraction): the same bits.
#define TERRA_VECTOR_MATH inline __attribute__((always_inline))
// The same for a kernel's element lambda: GCC keeps a lambda holding an inlined vexp as a call
// per element (scalar, ~15 ns) unless told; inlined into the loop, the loop vectorizes.
#define TERRA_VECTOR_LAMBDA __attribute__((always_inline))
// The constants of vexp and vtanh, named: the generated kernels (jit_elementwise.cpp) emit the
// same operations on the same values.
namespace exp_k {
inline constexpr float kLo = -86.6f, kHi = 88.72f;  // the clamp
inline constexpr float kLog2e = 1.44269504088896341f, kRound = 12582912.0f;  // 1.5 * 2^23
inline constexpr int32_t kRoundBits = 0x4B400000, kBias = 126;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = 2.12194440e-4f;
inline constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
inline constexpr float kZeroBelow = -103.98f;
}  // namespace exp_k
namespace tanh_k {
inline constexpr float kSmall = 0.625f;
// p = kP0; p = p*z + kP1; p = p*z - kM2; p = p*z + kP3; p = p*z - kM4 (subtractions as written)
inline constexpr float kP0 = -5.70498872745e-3f, kP1 = 2.06390887954e-2f, kM2 = 5.37397155531e-2f,
                       kP3 = 1.33314422036e-1f, kM4 = 3.33332819422e-1f;
}  // namespace tanh_k
TERRA_VECTOR_MATH float vexp(float x) {
  using namespace exp_k;
  // exp(x) = 2^n e^r, |r| <= ln2/2; Cephes' polynomial (about 1 ulp).
  float xc = std::min(std::max(x, kLo), kHi);
  // Round to nearest by the 1.5 * 2^23 trick: no floor or float->int conversion, which GCC will
  // not vectorize under -ftrapping-math.
  float t = xc * kLog2e + kRound;
  int32_t ni = std::bit_cast<int32_t>(t) - kRoundBits;
  float n = t - kRound;
  float r = xc - n * kLn2Hi + n * kLn2Lo;
  float p = kP[0];
  p = p * r + kP[1];
  p = p * r + kP[2];
  p = p * r + kP[3];
  p = p * r + kP[4];
  p = p * r + kP[5];
  p = p * r * r + r + 1.0f;
  // 2^(n-1) * 2 keeps n = 128 representable; below -86.6 the true value is under 2.6e-38.
  float scale = std::bit_cast<float>((ni + kBias) << 23);
  float y = p * scale * 2.0f;
  y = x > kHi ? std::numeric_limits<float>::infinity() : y;
  y = x < kZeroBelow ? 0.0f : y;
  return x != x ? x : y;
}
TERRA_VECTOR_MATH float vtanh(float x) {
  using namespace tanh_k;
  float ax = std::fabs(x);
  // |x| >= 0.625: 1 - 2 / (e^{2|x|} + 1); below, Cephes' odd polynomial (no cancellation).
  float big = 1.0f - 2.0f / (vexp(2.0f * ax) + 1.0f);
  big = x < 0 ? -big : big;
  float z = x * x;
  float p = kP0;
  p = p * z + kP1;
  p = p * z - kM2;
  p = p * z + kP3;
  p = p * z - kM4;
  float small = p * z * x + x;
  return ax < kSmall ? small : big;
}
// erf by Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7), the form ATen's vectorized erf uses.
TERRA_VECTOR_MATH float verf(float x) {
  float ax = std::fabs(x);
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  float y = 1.0f - p * t * vexp(-ax * ax);
  return x < 0 ? -y : y;
}
template <class T> TERRA_VECTOR_MATH T any_exp(T x) { if constexpr (std::is_same_v<T, float>) return vexp(x); else return std::exp(x); }
template <class T> TERRA_VECTOR_MATH T any_tanh(T x) { if constexpr (std::is_same_v<T, float>) return vtanh(x); else return std::tanh(x); }
template <class T> TERRA_VECTOR_MATH T any_erf(T x) { if constexpr (std::is_same_v<T, float>) return verf(x); else return std::erf(x); }

}  // namespace terra::cpu
