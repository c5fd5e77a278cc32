// Activations on the CPU: loops over one element function per op, with the vectorized float math
// (vector_math.h); the fused tiles (tile_*) run the same element functions, so a fused group
// computes the same bits as these kernels.
#include <cmath>

#include "terra/backend/activations_kernels.h"
#include "terra/backend/cpu/float_unary.h"
#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/tile_loops.h"
#include "terra/backend/cpu/vector_math.h"

namespace terra::kernels {
namespace {

using cpu::any_erf;
using cpu::any_exp;
using cpu::any_tanh;

using cpu::float_unary;

// Element functions are types: the kernel and the fused tile (tile_f32) apply the same one.
struct exp_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return any_exp(a);
  }
};
struct relu_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return a < T(0) ? T(0) : a;  // lets NaN through, as torch
  }
};
struct sigmoid_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return T(1) / (T(1) + any_exp(-a));
  }
};
struct tanh_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return any_tanh(a);
  }
};

template <class T>
TERRA_VECTOR_MATH T gelu_exact(T x) { return T(0.5) * x * (T(1) + any_erf(x * T(M_SQRT1_2))); }
template <class T>
TERRA_VECTOR_MATH T gelu_tanh(T x) { return T(0.5) * x * (T(1) + any_tanh(T(kSqrt2Pi) * (x + T(kGeluC) * x * x * x))); }
// d gelu / dx: Phi(x) + x phi(x)
template <class T>
TERRA_VECTOR_MATH T dgelu_exact(T x) {
  return T(0.5) * (T(1) + any_erf(x * T(M_SQRT1_2))) + x * T(kInvSqrt2Pi) * any_exp(T(-0.5) * x * x);
}
// 0.5 (1 + t) + 0.5 x (1 - t^2) u',  u = k (x + c x^3)
template <class T>
TERRA_VECTOR_MATH T dgelu_tanh(T x) {
  T t = any_tanh(T(kSqrt2Pi) * (x + T(kGeluC) * x * x * x));
  T du = T(kSqrt2Pi) * (T(1) + T(3 * kGeluC) * x * x);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
}

}  // namespace

void exp(const KernelArgs& k) { float_unary(k, exp_fn{}); }

void relu(const KernelArgs& k) {
  auto run = [&](auto z) {
    using T = decltype(z);
    cpu::unary_loop<T, T>(*k.in[0].impl(), *k.out[0].impl(), relu_fn{});
  };
  if (k.out[0].dtype() == DType::Int64) run(int64_t{});
  else visit_floating(k.out[0].dtype(), run);
}

void leaky_relu(const KernelArgs& k) {
  double s = k.attrs.f("negative_slope");
  float_unary(k, [s](auto a) {
    using T = decltype(a);
    return a > T(0) ? a : a * T(s);
  });
}

void gelu(const KernelArgs& k) {
  if (k.attrs.b("tanh")) float_unary(k, [](auto a) TERRA_VECTOR_LAMBDA { return gelu_tanh(a); });
  else float_unary(k, [](auto a) TERRA_VECTOR_LAMBDA { return gelu_exact(a); });
}

void gelu_backward(const KernelArgs& k) {
  bool tanh_form = k.attrs.b("tanh");
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    auto& go = *k.in[0].impl();
    auto& x = *k.in[1].impl();
    auto& o = *k.out[0].impl();
    if (tanh_form) cpu::binary_loop<T, T, T>(go, x, o, [](T g, T a) TERRA_VECTOR_LAMBDA { return g * dgelu_tanh(a); });
    else cpu::binary_loop<T, T, T>(go, x, o, [](T g, T a) TERRA_VECTOR_LAMBDA { return g * dgelu_exact(a); });
  });
}

void sigmoid(const KernelArgs& k) { float_unary(k, sigmoid_fn{}); }
void tanh(const KernelArgs& k) { float_unary(k, tanh_fn{}); }

// log(1 + exp(beta x)) / beta, linear above the threshold (as torch).
void softplus(const KernelArgs& k) {
  double beta = k.attrs.f("beta"), th = k.attrs.f("threshold");
  float_unary(k, [beta, th](auto a) {
    using T = decltype(a);
    T bx = a * T(beta);
    return bx > T(th) ? a : T(std::log1p(std::exp(bx)) / T(beta));
  });
}

void tile_exp(const TileArgs& t) { cpu::tile_unary<exp_fn>(t); }
void tile_relu(const TileArgs& t) { cpu::tile_unary<relu_fn>(t); }
void tile_sigmoid(const TileArgs& t) { cpu::tile_unary<sigmoid_fn>(t); }
void tile_tanh(const TileArgs& t) { cpu::tile_unary<tanh_fn>(t); }

}  // namespace terra::kernels
