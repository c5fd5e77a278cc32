// Elementwise math on the CPU: broadcast loops over one element function per op; the fused tiles
// (tile_*) run the same element functions, so a fused group computes the same bits as these kernels.
#include <cmath>
#include <limits>

#include "terra/backend/cpu/float_unary.h"
#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/tile_loops.h"
#include "terra/backend/cpu/vector_math.h"
#include "terra/backend/elementwise_math_kernels.h"

namespace terra::kernels {
namespace {

using cpu::float_unary;
template <class F>
void numeric_unary(const KernelArgs& k, F f) {
  DType d = k.out[0].dtype();
  auto run = [&](auto z) {
    using T = decltype(z);
    cpu::unary_loop<T, T>(*k.in[0].impl(), *k.out[0].impl(), [&](T a) TERRA_VECTOR_LAMBDA { return static_cast<T>(f(a)); });
  };
  if (d == DType::Int64) run(int64_t{});
  else visit_floating(d, run);
}
template <class F>
void binary_any(const KernelArgs& k, F f) {
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::binary_loop<T, T, T>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                              [&](T a, T b) TERRA_VECTOR_LAMBDA { return static_cast<T>(f(a, b)); });
  });
}

// Element functions are types: the kernel and the fused tile (tile_f32) apply the same one
// (sqrt_fn here: pow_scalar's 0.5 exponent runs it too).
struct sqrt_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return std::sqrt(a);
  }
};
struct rsqrt_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return T(1) / std::sqrt(a);
  }
};
struct abs_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return a < T(0) ? T(-a) : a;  // -0 and NaN pass unchanged
  }
};
// NaN on either side propagates, as torch.
struct maximum_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct minimum_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};

}  // namespace

void pow(const KernelArgs& k) {
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::binary_loop<T, T, T>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                              [](T a, T b) { return std::pow(a, b); });
  });
}

void pow_scalar(const KernelArgs& k) {
  double e = k.attrs.f("exponent");
  if (e == 2.0) return float_unary(k, [](auto a) { return a * a; });
  if (e == 1.0) return float_unary(k, [](auto a) { return a; });
  if (e == 0.5) return float_unary(k, sqrt_fn{});
  if (e == -1.0) return float_unary(k, [](auto a) { return decltype(a)(1) / a; });
  float_unary(k, [e](auto a) { return std::pow(a, decltype(a)(e)); });
}

void sqrt(const KernelArgs& k) { float_unary(k, sqrt_fn{}); }
void rsqrt(const KernelArgs& k) { float_unary(k, rsqrt_fn{}); }
void log(const KernelArgs& k) { float_unary(k, [](auto a) { return std::log(a); }); }

void abs(const KernelArgs& k) { numeric_unary(k, abs_fn{}); }
void sign(const KernelArgs& k) {
  numeric_unary(k, [](auto a) {
    using T = decltype(a);
    return a != a ? a : T(T(0) < a) - T(a < T(0));  // NaN stays NaN
  });
}

void clamp(const KernelArgs& k) {
  bool has_lo = k.attrs.b("has_min"), has_hi = k.attrs.b("has_max");
  double lo_d = k.attrs.f("min"), hi_d = k.attrs.f("max");
  DType d = k.out[0].dtype();
  auto run = [&](auto z) {
    using T = decltype(z);
    const T lo = has_lo ? T(lo_d) : std::numeric_limits<T>::lowest();
    const T hi = has_hi ? T(hi_d) : std::numeric_limits<T>::max();
    // NaN compares false both ways and passes through, as torch.
    cpu::unary_loop<T, T>(*k.in[0].impl(), *k.out[0].impl(), [lo, hi](T a) {
      T r = a < lo ? lo : a;
      return r > hi ? hi : r;
    });
  };
  if (d == DType::Int64) run(int64_t{});
  else visit_floating(d, run);
}

void maximum(const KernelArgs& k) { binary_any(k, maximum_fn{}); }
void minimum(const KernelArgs& k) { binary_any(k, minimum_fn{}); }

void tile_sqrt(const TileArgs& t) { cpu::tile_unary<sqrt_fn>(t); }
void tile_rsqrt(const TileArgs& t) { cpu::tile_unary<rsqrt_fn>(t); }
void tile_abs(const TileArgs& t) { cpu::tile_unary<abs_fn>(t); }
void tile_maximum(const TileArgs& t) { cpu::tile_binary<maximum_fn>(t); }
void tile_minimum(const TileArgs& t) { cpu::tile_binary<minimum_fn>(t); }

}  // namespace terra::kernels
