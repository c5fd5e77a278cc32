// exp, relu, leaky_relu, gelu (+ gelu_backward), sigmoid, tanh, softplus.
#include <stdexcept>
#include <string>

#include "terra/backend/activations_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/core/errors.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/elementwise.h"

namespace terra {
namespace {

Tensor floating(const Tensor& x) { return is_floating(x.dtype()) ? x : x.to(DType::Float32); }

TensorMetas infer_float(const char* op, std::span<const Tensor> in) {
  if (!is_floating(in[0].dtype()))
    throw std::invalid_argument(std::string("[") + op + "] needs a floating tensor, got " +
                                dtype_name(in[0].dtype()) + " of shape " + shape_str(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}

// ---- exp (here, next to the other exp-based kernels) ----
TensorMetas infer_exp(std::span<const Tensor> in, const Attrs&) { return infer_float("exp", in); }
TensorList grad_exp(const GradArgs& g) { return {mul(g.grad_out[0], g.out[0])}; }
const OpDef kExp{.name = "exp", .flags = kElementwise | kSaveOutputs, .infer = infer_exp, .kernel = kernels::exp,
                 .grad = grad_exp, .tile_f32 = kernels::tile_exp};

// ---- relu, leaky_relu ----
TensorMetas infer_relu(std::span<const Tensor> in, const Attrs&) {
  if (in[0].dtype() == DType::Bool)
    throw std::invalid_argument("[relu] is not defined for a bool tensor of shape " + shape_str(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}
TensorList grad_relu(const GradArgs& g) { return {where(gt(g.out[0], 0.0), g.grad_out[0], 0.0)}; }
const OpDef kRelu{.name = "relu", .flags = kElementwise | kSaveOutputs, .infer = infer_relu, .kernel = kernels::relu,
                  .grad = grad_relu, .tile_f32 = kernels::tile_relu};

TensorMetas infer_leaky_relu(std::span<const Tensor> in, const Attrs&) {
  return infer_float("leaky_relu", in);
}
TensorList grad_leaky_relu(const GradArgs& g) {
  const Tensor& go = g.grad_out[0];
  return {where(gt(g.in[0], 0.0), go, mul(go, g.attrs.f("negative_slope")))};
}
const OpDef kLeakyRelu{.name = "leaky_relu", .flags = kElementwise | kSaveInputs, .infer = infer_leaky_relu,
                       .kernel = kernels::leaky_relu, .grad = grad_leaky_relu};

// ---- gelu ----
// The constants live with the kernels (backend/activations_kernels.h); the second derivative uses them too.
using kernels::kGeluC;
using kernels::kInvSqrt2Pi;
using kernels::kSqrt2Pi;

TensorMetas infer_gelu(std::span<const Tensor> in, const Attrs&) { return infer_float("gelu", in); }
TensorList grad_gelu(const GradArgs& g) {
  return {gelu_backward(g.grad_out[0], g.in[0], g.attrs.b("tanh"))};
}
const OpDef kGelu{.name = "gelu", .flags = kElementwise | kSaveInputs, .infer = infer_gelu, .kernel = kernels::gelu,
                  .grad = grad_gelu};

TensorMetas infer_gelu_backward(std::span<const Tensor> in, const Attrs&) {
  if (in[0].shape() != in[1].shape() || in[0].dtype() != in[1].dtype() || !is_floating(in[1].dtype()))
    throw std::invalid_argument(std::string("[gelu_backward] grad_out ") + dtype_name(in[0].dtype()) + " " +
                                shape_str(in[0].shape()) + " and input " + dtype_name(in[1].dtype()) + " " +
                                shape_str(in[1].shape()) + " must be floating with equal shapes and dtypes");
  return {{in[1].shape(), in[1].dtype()}};
}
// Second derivative, with public ops: exact: phi(x) (2 - x^2); tanh form: (1 - t^2)(u' - x t u'^2 + x u''/2).
TensorList grad_gelu_backward(const GradArgs& g) {
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
                          .infer = infer_gelu_backward, .kernel = kernels::gelu_backward,
                          .grad = grad_gelu_backward};

// ---- sigmoid, tanh ----
TensorMetas infer_sigmoid(std::span<const Tensor> in, const Attrs&) { return infer_float("sigmoid", in); }
TensorList grad_sigmoid(const GradArgs& g) {
  const Tensor& o = g.out[0];
  return {mul(g.grad_out[0], mul(o, 1.0 - o))};
}
const OpDef kSigmoid{.name = "sigmoid", .flags = kElementwise | kSaveOutputs, .infer = infer_sigmoid,
                     .kernel = kernels::sigmoid, .grad = grad_sigmoid, .tile_f32 = kernels::tile_sigmoid};

TensorMetas infer_tanh(std::span<const Tensor> in, const Attrs&) { return infer_float("tanh", in); }
TensorList grad_tanh(const GradArgs& g) {
  const Tensor& o = g.out[0];
  return {mul(g.grad_out[0], 1.0 - mul(o, o))};
}
const OpDef kTanh{.name = "tanh", .flags = kElementwise | kSaveOutputs, .infer = infer_tanh, .kernel = kernels::tanh,
                  .grad = grad_tanh, .tile_f32 = kernels::tile_tanh};

// ---- softplus: log(1 + exp(beta x)) / beta, linear above the threshold (as torch) ----
TensorMetas infer_softplus(std::span<const Tensor> in, const Attrs&) { return infer_float("softplus", in); }
TensorList grad_softplus(const GradArgs& g) {
  const Tensor &x = g.in[0], &go = g.grad_out[0];
  Tensor bx = mul(x, g.attrs.f("beta"));
  return {where(gt(bx, g.attrs.f("threshold")), go, mul(go, sigmoid(bx)))};
}
const OpDef kSoftplus{.name = "softplus", .flags = kElementwise | kSaveInputs, .infer = infer_softplus,
                      .kernel = kernels::softplus, .grad = grad_softplus};

OpRegistrar r0(kExp), r1(kRelu), r2(kLeakyRelu), r3(kGelu), r4(kGeluBackward), r5(kSigmoid), r6(kTanh), r7(kSoftplus);

}  // namespace

Tensor exp(const Tensor& x) { need_defined("exp", x); return dispatch1(kExp, {floating(x)}); }
Tensor relu(const Tensor& x) { return dispatch1(kRelu, {x}); }
Tensor leaky_relu(const Tensor& x, double negative_slope) {
  need_defined("leaky_relu", x);
  return dispatch1(kLeakyRelu, {floating(x)}, Attrs{{"negative_slope", negative_slope}});
}
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  need_defined("gelu", x);
  return dispatch1(kGelu, {floating(x)}, Attrs{{"tanh", tanh_approximation}});
}
Tensor gelu_backward(const Tensor& grad_out, const Tensor& x, bool tanh_approximation) {
  return dispatch1(kGeluBackward, {grad_out, x}, Attrs{{"tanh", tanh_approximation}});
}
Tensor sigmoid(const Tensor& x) { need_defined("sigmoid", x); return dispatch1(kSigmoid, {floating(x)}); }
Tensor tanh(const Tensor& x) { need_defined("tanh", x); return dispatch1(kTanh, {floating(x)}); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  need_defined("softplus", x);
  if (beta == 0.0)
    throw std::invalid_argument("[softplus] beta must be nonzero (input shape " + shape_str(x.shape()) + ")");
  return dispatch1(kSoftplus, {floating(x)}, Attrs{{"beta", beta}, {"threshold", threshold}});
}

}  // namespace terra
