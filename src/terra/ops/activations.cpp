// exp, relu, leaky_relu, gelu (+ gelu_backward), sigmoid, tanh, softplus.
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>
#include <stdexcept>
#include <string>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/tile_loops.h"
#include "terra/backend/cpu/vector_math.h"
#include "terra/core/dispatch.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/elementwise.h"

namespace terra {
namespace {

using cpu::any_erf;
using cpu::any_exp;
using cpu::any_tanh;

void need(const char* op, const Tensor& x, int k = 0) {
  if (!x.defined()) throw std::invalid_argument(std::string("[") + op + "] input " + std::to_string(k) + " is undefined");
}
Tensor floating(const Tensor& x) { return is_floating(x.dtype()) ? x : x.to(DType::Float32); }

TensorMetas infer_float(const char* op, std::span<const Tensor> in) {
  if (!is_floating(in[0].dtype()))
    throw std::invalid_argument(std::string("[") + op + "] needs a floating tensor, got " +
                                dtype_name(in[0].dtype()) + " of shape " + shape_str(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}

template <class F>
void float_unary(const KernelArgs& k, F f) {
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::unary_loop<T, T>(*k.in[0].impl(), *k.out[0].impl(), [f](T a) TERRA_VECTOR_LAMBDA { return static_cast<T>(f(a)); });
  });
}


// ---- exp (here, next to the other exp-based kernels) ----
TensorMetas infer_exp(std::span<const Tensor> in, const Attrs&) { return infer_float("exp", in); }
// Element functions are types: the kernel and the fused tile (tile_f32) apply the same one.
struct exp_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return any_exp(a);
  }
};
void kernel_exp(const KernelArgs& k) { float_unary(k, exp_fn{}); }
std::vector<Tensor> grad_exp(const GradArgs& g) { return {mul(g.grad_out[0], g.out[0])}; }
const OpDef kExp{.name = "exp", .flags = kElementwise | kSaveOutputs, .infer = infer_exp, .kernel = kernel_exp,
                 .grad = grad_exp, .tile_f32 = cpu::tile_unary<exp_fn>};

// ---- relu, leaky_relu ----
TensorMetas infer_relu(std::span<const Tensor> in, const Attrs&) {
  if (in[0].dtype() == DType::Bool)
    throw std::invalid_argument("[relu] is not defined for a bool tensor of shape " + shape_str(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}
struct relu_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return a < T(0) ? T(0) : a;  // lets NaN through, as torch
  }
};
void kernel_relu(const KernelArgs& k) {
  auto run = [&](auto z) {
    using T = decltype(z);
    cpu::unary_loop<T, T>(*k.in[0].impl(), *k.out[0].impl(), relu_fn{});
  };
  if (k.out[0].dtype() == DType::Int64) run(int64_t{});
  else visit_floating(k.out[0].dtype(), run);
}
std::vector<Tensor> grad_relu(const GradArgs& g) { return {where(gt(g.out[0], 0.0), g.grad_out[0], 0.0)}; }
const OpDef kRelu{.name = "relu", .flags = kElementwise | kSaveOutputs, .infer = infer_relu, .kernel = kernel_relu,
                  .grad = grad_relu, .tile_f32 = cpu::tile_unary<relu_fn>};

TensorMetas infer_leaky_relu(std::span<const Tensor> in, const Attrs&) {
  return infer_float("leaky_relu", in);
}
void kernel_leaky_relu(const KernelArgs& k) {
  double s = k.attrs.f("negative_slope");
  float_unary(k, [s](auto a) {
    using T = decltype(a);
    return a > T(0) ? a : a * T(s);
  });
}
std::vector<Tensor> grad_leaky_relu(const GradArgs& g) {
  const Tensor& go = g.grad_out[0];
  return {where(gt(g.in[0], 0.0), go, mul(go, g.attrs.f("negative_slope")))};
}
const OpDef kLeakyRelu{.name = "leaky_relu", .flags = kElementwise | kSaveInputs, .infer = infer_leaky_relu,
                       .kernel = kernel_leaky_relu, .grad = grad_leaky_relu};

// ---- gelu ----
constexpr double kSqrt2Pi = 0.79788456080286535588;     // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2 pi)
constexpr double kGeluC = 0.044715;

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

TensorMetas infer_gelu(std::span<const Tensor> in, const Attrs&) { return infer_float("gelu", in); }
void kernel_gelu(const KernelArgs& k) {
  if (k.attrs.b("tanh")) float_unary(k, [](auto a) TERRA_VECTOR_LAMBDA { return gelu_tanh(a); });
  else float_unary(k, [](auto a) TERRA_VECTOR_LAMBDA { return gelu_exact(a); });
}
std::vector<Tensor> grad_gelu(const GradArgs& g) {
  return {gelu_backward(g.grad_out[0], g.in[0], g.attrs.b("tanh"))};
}
const OpDef kGelu{.name = "gelu", .flags = kElementwise | kSaveInputs, .infer = infer_gelu, .kernel = kernel_gelu,
                  .grad = grad_gelu};

TensorMetas infer_gelu_backward(std::span<const Tensor> in, const Attrs&) {
  if (in[0].shape() != in[1].shape() || in[0].dtype() != in[1].dtype() || !is_floating(in[1].dtype()))
    throw std::invalid_argument(std::string("[gelu_backward] grad_out ") + dtype_name(in[0].dtype()) + " " +
                                shape_str(in[0].shape()) + " and input " + dtype_name(in[1].dtype()) + " " +
                                shape_str(in[1].shape()) + " must be floating with equal shapes and dtypes");
  return {{in[1].shape(), in[1].dtype()}};
}
void kernel_gelu_backward(const KernelArgs& k) {
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
// Second derivative, with public ops: exact: phi(x) (2 - x^2); tanh form: (1 - t^2)(u' - x t u'^2 + x u''/2).
std::vector<Tensor> grad_gelu_backward(const GradArgs& g) {
  const Tensor &go = g.in[0], &x = g.in[1], &gg = g.grad_out[0];
  bool tanh_form = g.attrs.b("tanh");
  Tensor x2 = mul(x, x);
  Tensor d2;
  if (!tanh_form) {
    Tensor phi = mul(exp(mul(x2, -0.5)), kInvSqrt2Pi);
    d2 = mul(phi, 2.0 - x2);
  } else {
    Tensor t = tanh(mul(add(x, mul(mul(x2, x), kGeluC)), kSqrt2Pi));
    Tensor s = 1.0 - mul(t, t);
    Tensor du = mul(add(mul(x2, 3 * kGeluC), 1.0), kSqrt2Pi);
    Tensor ddu = mul(x, 6 * kGeluC * kSqrt2Pi);
    d2 = mul(s, add(sub(du, mul(mul(x, t), mul(du, du))), mul(mul(x, ddu), 0.5)));
  }
  return {gelu_backward(gg, x, tanh_form), mul(mul(gg, go), d2)};
}
const OpDef kGeluBackward{.name = "gelu_backward", .flags = kElementwise | kSaveInputs,
                          .infer = infer_gelu_backward, .kernel = kernel_gelu_backward,
                          .grad = grad_gelu_backward};

// ---- sigmoid, tanh ----
TensorMetas infer_sigmoid(std::span<const Tensor> in, const Attrs&) { return infer_float("sigmoid", in); }
struct sigmoid_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return T(1) / (T(1) + any_exp(-a));
  }
};
void kernel_sigmoid(const KernelArgs& k) { float_unary(k, sigmoid_fn{}); }
std::vector<Tensor> grad_sigmoid(const GradArgs& g) {
  const Tensor& o = g.out[0];
  return {mul(g.grad_out[0], mul(o, 1.0 - o))};
}
const OpDef kSigmoid{.name = "sigmoid", .flags = kElementwise | kSaveOutputs, .infer = infer_sigmoid,
                     .kernel = kernel_sigmoid, .grad = grad_sigmoid, .tile_f32 = cpu::tile_unary<sigmoid_fn>};

TensorMetas infer_tanh(std::span<const Tensor> in, const Attrs&) { return infer_float("tanh", in); }
struct tanh_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return any_tanh(a);
  }
};
void kernel_tanh(const KernelArgs& k) { float_unary(k, tanh_fn{}); }
std::vector<Tensor> grad_tanh(const GradArgs& g) {
  const Tensor& o = g.out[0];
  return {mul(g.grad_out[0], 1.0 - mul(o, o))};
}
const OpDef kTanh{.name = "tanh", .flags = kElementwise | kSaveOutputs, .infer = infer_tanh, .kernel = kernel_tanh,
                  .grad = grad_tanh, .tile_f32 = cpu::tile_unary<tanh_fn>};

// ---- softplus: log(1 + exp(beta x)) / beta, linear above the threshold (as torch) ----
TensorMetas infer_softplus(std::span<const Tensor> in, const Attrs&) { return infer_float("softplus", in); }
void kernel_softplus(const KernelArgs& k) {
  double beta = k.attrs.f("beta"), th = k.attrs.f("threshold");
  float_unary(k, [beta, th](auto a) {
    using T = decltype(a);
    T bx = a * T(beta);
    return bx > T(th) ? a : T(std::log1p(std::exp(bx)) / T(beta));
  });
}
std::vector<Tensor> grad_softplus(const GradArgs& g) {
  const Tensor &x = g.in[0], &go = g.grad_out[0];
  Tensor bx = mul(x, g.attrs.f("beta"));
  return {where(gt(bx, g.attrs.f("threshold")), go, mul(go, sigmoid(bx)))};
}
const OpDef kSoftplus{.name = "softplus", .flags = kElementwise | kSaveInputs, .infer = infer_softplus,
                      .kernel = kernel_softplus, .grad = grad_softplus};

OpRegistrar r0(kExp), r1(kRelu), r2(kLeakyRelu), r3(kGelu), r4(kGeluBackward), r5(kSigmoid), r6(kTanh), r7(kSoftplus);

}  // namespace

Tensor exp(const Tensor& x) { need("exp", x); return dispatch1(kExp, {floating(x)}); }
Tensor relu(const Tensor& x) { return dispatch1(kRelu, {x}); }
Tensor leaky_relu(const Tensor& x, double negative_slope) {
  need("leaky_relu", x);
  return dispatch1(kLeakyRelu, {floating(x)}, Attrs{{"negative_slope", negative_slope}});
}
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  need("gelu", x);
  return dispatch1(kGelu, {floating(x)}, Attrs{{"tanh", tanh_approximation}});
}
Tensor gelu_backward(const Tensor& grad_out, const Tensor& x, bool tanh_approximation) {
  return dispatch1(kGeluBackward, {grad_out, x}, Attrs{{"tanh", tanh_approximation}});
}
Tensor sigmoid(const Tensor& x) { need("sigmoid", x); return dispatch1(kSigmoid, {floating(x)}); }
Tensor tanh(const Tensor& x) { need("tanh", x); return dispatch1(kTanh, {floating(x)}); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  need("softplus", x);
  if (beta == 0.0)
    throw std::invalid_argument("[softplus] beta must be nonzero (input shape " + shape_str(x.shape()) + ")");
  return dispatch1(kSoftplus, {floating(x)}, Attrs{{"beta", beta}, {"threshold", threshold}});
}

}  // namespace terra
