// Arithmetic on the CPU: broadcast loops over one element function per op, which the fused tiles
// (tile_*) run too, so a fused group computes the same bits as these kernels.
#include <stdexcept>
#include <string>
#include <type_traits>

#include "terra/backend/arithmetic_kernels.h"
#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/tile_loops.h"
#include "terra/backend/cpu/vector_math.h"

namespace terra::kernels {
namespace {

// a / b that never traps: integers truncate and INT64_MIN / -1 wraps to INT64_MIN (what torch's
// INT64_MIN * -1 and neg give, and numpy's //); a zero divisor was refused before, 0 is a guard.
template <class T>
T safe_div(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return b && a;
  } else if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    if (b == -1) return T(0 - static_cast<std::make_unsigned_t<T>>(a));
    return a / b;
  } else {
    return a / b;
  }
}

template <class F>
void binary_kernel(const KernelArgs& k, F f) {
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::binary_loop<T, T, T>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                              [&](T a, T b) TERRA_VECTOR_LAMBDA { return static_cast<T>(f(a, b)); });
  });
}

// The element functions: the kernels' and, for float32, the fused tiles'.
#define TERRA_BINARY_FN(NAME, EXPR)                 \
  struct NAME##_fn {                                \
    template <class T>                              \
    TERRA_VECTOR_MATH T operator()(T a, T b) const { \
      return static_cast<T>(EXPR);                  \
    }                                               \
  };
TERRA_BINARY_FN(add, a + b)
TERRA_BINARY_FN(sub, a - b)
TERRA_BINARY_FN(mul, a * b)
TERRA_BINARY_FN(div, safe_div(a, b))
#undef TERRA_BINARY_FN

struct neg_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return static_cast<T>(-a);
  }
};

}  // namespace

void add(const KernelArgs& k) { binary_kernel(k, add_fn{}); }
void sub(const KernelArgs& k) { binary_kernel(k, sub_fn{}); }
void mul(const KernelArgs& k) { binary_kernel(k, mul_fn{}); }
void div(const KernelArgs& k) { binary_kernel(k, div_fn{}); }
void neg(const KernelArgs& k) {
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::unary_loop<T, T>(*k.in[0].impl(), *k.out[0].impl(), neg_fn{});
  });
}

void tile_add(const TileArgs& t) { cpu::tile_binary<add_fn>(t); }
void tile_sub(const TileArgs& t) { cpu::tile_binary<sub_fn>(t); }
void tile_mul(const TileArgs& t) { cpu::tile_binary<mul_fn>(t); }
void tile_div(const TileArgs& t) { cpu::tile_binary<div_fn>(t); }
void tile_neg(const TileArgs& t) { cpu::tile_unary<neg_fn>(t); }

// Integer division by zero traps (SIGFPE) in C++: refuse it, as torch's ZeroDivisionError does.
// One serial pass over the divisor's own elements.
void check_divisor(const char* op, const Tensor& a, const Tensor& b) {
  if (is_floating(b.dtype())) return;
  bool zero = false;
  visit_dtype(b.dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::scan_values<T>(*b.impl(), [&](T v, int64_t) { return zero = v == T(0); });
  });
  if (zero)
    throw std::invalid_argument(std::string("[") + op + "] integer division by zero: the " + dtype_name(b.dtype()) +
                                " divisor of shape " + shape_str(b.shape()) +
                                " has a zero element (dividend of shape " + shape_str(a.shape()) + ")");
}

void copy_into(const KernelArgs& k) { cpu::copy_into(*k.in[1].impl(), *k.out[0].impl()); }

void fill(const KernelArgs& k) {
  double v = k.attrs.f("value");
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::unary_loop<T, T>(*k.out[0].impl(), *k.out[0].impl(), [v](T) { return static_cast<T>(v); });
  });
}

}  // namespace terra::kernels
