// pow, sqrt, rsqrt, log, abs, sign, clamp, maximum, minimum.
#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/backend/elementwise_math_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/core/errors.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/creation.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/reduce.h"

namespace terra {
namespace {

// Transcendental ops compute in floating point, as torch does for integer inputs.
Tensor floating(const Tensor& x) { return is_floating(x.dtype()) ? x : x.to(DType::Float32); }

TensorMetas infer_float_unary(const char* op, std::span<const Tensor> in) {
  if (!is_floating(in[0].dtype()))
    throw std::invalid_argument(std::string("[") + op + "] needs a floating tensor, got " +
                                dtype_name(in[0].dtype()) + " of shape " + shape_str(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}
TensorMetas infer_numeric_unary(const char* op, std::span<const Tensor> in) {
  if (in[0].dtype() == DType::Bool)
    throw std::invalid_argument(std::string("[") + op + "] is not defined for a bool tensor of shape " +
                                shape_str(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}
TensorMetas infer_binary_same(const char* op, std::span<const Tensor> in) {
  if (in[0].dtype() != in[1].dtype())
    throw std::invalid_argument(std::string("[") + op + "] dtypes " + dtype_name(in[0].dtype()) + " and " +
                                dtype_name(in[1].dtype()) + " differ (shapes " + shape_str(in[0].shape()) +
                                " and " + shape_str(in[1].shape()) + ")");
  return {{broadcast_shapes(op, in[0].shape(), in[1].shape()), in[0].dtype()}};
}

// ---- pow ----
TensorMetas infer_pow(std::span<const Tensor> in, const Attrs&) {
  auto m = infer_binary_same("pow", in);
  if (!is_floating(m[0].dtype))
    throw std::invalid_argument(std::string("[pow] needs floating tensors, got ") + dtype_name(m[0].dtype));
  return m;
}
// As torch: no gradient to the base where the exponent is 0; none to the exponent where base == 0
// and exponent >= 0 (log(0) would poison it).
TensorList grad_pow(const GradArgs& g) {
  const Tensor &a = g.in[0], &b = g.in[1], &go = g.grad_out[0], &out = g.out[0];
  Tensor ga = where(eq(b, 0.0), 0.0, mul(mul(go, b), pow(a, sub(b, 1.0))));
  Tensor gb = where(logical_and(eq(a, 0.0), ge(b, 0.0)), 0.0, mul(mul(go, out), log(a)));
  return {sum_to(ga, g.in_meta[0].shape), sum_to(gb, g.in_meta[1].shape)};
}
const OpDef kPow{.name = "pow", .flags = kElementwise | kSaveInputs | kSaveOutputs, .infer = infer_pow,
                 .kernel = kernels::pow, .grad = grad_pow};

TensorMetas infer_pow_scalar(std::span<const Tensor> in, const Attrs&) {
  return infer_float_unary("pow", in);
}
TensorList grad_pow_scalar(const GradArgs& g) {
  double e = g.attrs.f("exponent");
  if (e == 0.0) return {mul(g.grad_out[0], 0.0)};
  if (e == 1.0) return {g.grad_out[0]};
  return {mul(g.grad_out[0], mul(pow(g.in[0], e - 1.0), e))};
}
const OpDef kPowScalar{.name = "pow_scalar", .flags = kElementwise | kSaveInputs, .infer = infer_pow_scalar,
                       .kernel = kernels::pow_scalar, .grad = grad_pow_scalar};

// ---- sqrt, rsqrt, log (exp lives in activations.cpp with the vectorized float math) ----
TensorMetas infer_sqrt(std::span<const Tensor> in, const Attrs&) { return infer_float_unary("sqrt", in); }
TensorList grad_sqrt(const GradArgs& g) { return {div(mul(g.grad_out[0], 0.5), g.out[0])}; }
const OpDef kSqrt{.name = "sqrt", .flags = kElementwise | kSaveOutputs, .infer = infer_sqrt, .kernel = kernels::sqrt,
                  .grad = grad_sqrt, .tile_f32 = kernels::tile_sqrt};

TensorMetas infer_rsqrt(std::span<const Tensor> in, const Attrs&) { return infer_float_unary("rsqrt", in); }
// d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 out^3
TensorList grad_rsqrt(const GradArgs& g) {
  const Tensor& o = g.out[0];
  return {mul(g.grad_out[0], mul(mul(o, o), mul(o, -0.5)))};
}
const OpDef kRsqrt{.name = "rsqrt", .flags = kElementwise | kSaveOutputs, .infer = infer_rsqrt,
                   .kernel = kernels::rsqrt, .grad = grad_rsqrt, .tile_f32 = kernels::tile_rsqrt};


TensorMetas infer_log(std::span<const Tensor> in, const Attrs&) { return infer_float_unary("log", in); }
TensorList grad_log(const GradArgs& g) { return {div(g.grad_out[0], g.in[0])}; }
const OpDef kLog{.name = "log", .flags = kElementwise | kSaveInputs, .infer = infer_log, .kernel = kernels::log,
                 .grad = grad_log};

// ---- abs, sign ----
TensorMetas infer_abs(std::span<const Tensor> in, const Attrs&) { return infer_numeric_unary("abs", in); }
TensorList grad_abs(const GradArgs& g) { return {mul(g.grad_out[0], sign(g.in[0]))}; }
const OpDef kAbs{.name = "abs", .flags = kElementwise | kSaveInputs, .infer = infer_abs, .kernel = kernels::abs,
                 .grad = grad_abs, .tile_f32 = kernels::tile_abs};

TensorMetas infer_sign(std::span<const Tensor> in, const Attrs&) { return infer_numeric_unary("sign", in); }
TensorList grad_sign(const GradArgs& g) { return {mul(g.grad_out[0], 0.0)}; }
const OpDef kSign{.name = "sign", .flags = kElementwise, .infer = infer_sign, .kernel = kernels::sign,
                  .grad = grad_sign};

// ---- clamp ----
TensorMetas infer_clamp(std::span<const Tensor> in, const Attrs&) { return infer_numeric_unary("clamp", in); }
TensorList grad_clamp(const GradArgs& g) {
  const Tensor& x = g.in[0];
  Tensor keep;
  if (g.attrs.b("has_min")) keep = ge(x, g.attrs.f("min"));
  if (g.attrs.b("has_max")) {
    Tensor m = le(x, g.attrs.f("max"));
    keep = keep.defined() ? logical_and(keep, m) : m;
  }
  return {where(keep, g.grad_out[0], 0.0)};
}
const OpDef kClamp{.name = "clamp", .flags = kElementwise | kSaveInputs, .infer = infer_clamp,
                   .kernel = kernels::clamp, .grad = grad_clamp};

// ---- maximum, minimum ----
TensorMetas infer_maximum(std::span<const Tensor> in, const Attrs&) { return infer_binary_same("maximum", in); }
TensorMetas infer_minimum(std::span<const Tensor> in, const Attrs&) { return infer_binary_same("minimum", in); }
// Share of the gradient that goes to `a`: 1 where a wins, 1/2 at ties.
TensorList grad_extreme(const GradArgs& g, bool is_max) {
  const Tensor &a = g.in[0], &b = g.in[1], &go = g.grad_out[0];
  DType dt = go.dtype();
  Tensor tie = mul(eq(a, b).to(dt), 0.5);
  Tensor wa = add((is_max ? gt(a, b) : lt(a, b)).to(dt), tie);
  Tensor wb = add((is_max ? gt(b, a) : lt(b, a)).to(dt), tie);
  return {sum_to(mul(go, wa), g.in_meta[0].shape), sum_to(mul(go, wb), g.in_meta[1].shape)};
}
TensorList grad_maximum(const GradArgs& g) { return grad_extreme(g, true); }
TensorList grad_minimum(const GradArgs& g) { return grad_extreme(g, false); }
const OpDef kMaximum{.name = "maximum", .flags = kElementwise | kSaveInputs, .infer = infer_maximum,
                     .kernel = kernels::maximum, .grad = grad_maximum, .tile_f32 = kernels::tile_maximum};
const OpDef kMinimum{.name = "minimum", .flags = kElementwise | kSaveInputs, .infer = infer_minimum,
                     .kernel = kernels::minimum, .grad = grad_minimum, .tile_f32 = kernels::tile_minimum};

OpRegistrar r1(kPow), r2(kPowScalar), r3(kSqrt), r4(kRsqrt), r6(kLog), r7(kAbs), r8(kSign), r9(kClamp),
    r10(kMaximum), r11(kMinimum);

Tensor binary(const OpDef& op, Tensor a, Tensor b) {
  need_defined(op.name, a, 0);
  need_defined(op.name, b, 1);
  promote_pair(a, b);
  return dispatch1(op, {std::move(a), std::move(b)});
}

}  // namespace

Tensor pow(const Tensor& base, const Tensor& exponent) {
  need_defined("pow", base, 0);
  need_defined("pow", exponent, 1);
  Tensor a = base, b = exponent;
  promote_pair(a, b);
  return dispatch1(kPow, {floating(a), floating(b)});
}
Tensor pow(const Tensor& base, double exponent) {
  need_defined("pow", base);
  return dispatch1(kPowScalar, {floating(base)}, Attrs{{"exponent", exponent}});
}
Tensor sqrt(const Tensor& x) { need_defined("sqrt", x); return dispatch1(kSqrt, {floating(x)}); }
Tensor rsqrt(const Tensor& x) { need_defined("rsqrt", x); return dispatch1(kRsqrt, {floating(x)}); }
Tensor log(const Tensor& x) { need_defined("log", x); return dispatch1(kLog, {floating(x)}); }
Tensor abs(const Tensor& x) { return dispatch1(kAbs, {x}); }
Tensor sign(const Tensor& x) { return dispatch1(kSign, {x}); }

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  need_defined("clamp", x);
  if (!min && !max)
    throw std::invalid_argument("[clamp] at least one of min and max must be given (input shape " +
                                shape_str(x.shape()) + ")");
  Tensor in = x;
  auto integral = [](std::optional<double> v) { return !v || *v == std::floor(*v); };
  // A fractional bound makes an integer tensor float, as torch's result-type rule does.
  if (!is_floating(in.dtype()) && !(integral(min) && integral(max))) in = in.to(DType::Float32);
  return dispatch1(kClamp, {in}, Attrs{{"has_min", bool(min)}, {"min", min.value_or(0.0)},
                                       {"has_max", bool(max)}, {"max", max.value_or(0.0)}});
}

Tensor maximum(const Tensor& a, const Tensor& b) { return binary(kMaximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(kMinimum, a, b); }

}  // namespace terra
