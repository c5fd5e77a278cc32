#include "terra/ops/optim_ops.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/core/dispatch.h"

namespace terra {
namespace {

void check_scalar_f64(const char* op, const char* what, const Tensor& t) {
  if (t.dim() != 0 || t.dtype() != DType::Float64)
    throw std::invalid_argument(std::string("[") + op + "] " + what + " must be a float64 0-d tensor, got " +
                                dtype_name(t.dtype()) + " of shape " + shape_str(t.shape()));
}
void check_dtype(const char* op, DType d) {
  if (!is_floating(d))
    throw std::invalid_argument(std::string("[") + op + "] result dtype must be floating, got " + dtype_name(d));
}
double read0(const Tensor& t) { return *t.impl()->data_as<double>(); }
// One rounding from double to the result dtype, as scalar_like does for a host double.
void write0(const Tensor& t, double v) {
  visit_dtype(t.dtype(), [&](auto z) {
    using T = decltype(z);
    *t.impl()->data_as<T>() = static_cast<T>(v);
  });
}

std::vector<TensorMeta> infer_adam_step_scalars(std::span<const Tensor> in, const Attrs& a) {
  check_scalar_f64("adam_step_scalars", "step count", in[0]);
  check_scalar_f64("adam_step_scalars", "learning rate", in[1]);
  const DType d = a.dtype("dtype");
  check_dtype("adam_step_scalars", d);
  return {{{}, d}, {{}, d}};
}
void kernel_adam_step_scalars(const KernelArgs& k) {
  const double t = read0(k.in[0]), lr = read0(k.in[1]);
  // Same expressions as torch's (and formerly our) host code, in double.
  const double bc1 = 1.0 - std::pow(k.attrs.f("beta1"), t);
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(k.attrs.f("beta2"), t));
  write0(k.out[0], bc2_sqrt);
  write0(k.out[1], -lr / bc1);
}
// A function of a step count: no gradient.
const OpDef kAdamStepScalars{.name = "adam_step_scalars", .flags = kNoGrad, .infer = infer_adam_step_scalars,
                             .kernel = kernel_adam_step_scalars};

std::vector<TensorMeta> infer_sgd_dampening_factor(std::span<const Tensor> in, const Attrs& a) {
  check_scalar_f64("sgd_dampening_factor", "step count", in[0]);
  const DType d = a.dtype("dtype");
  check_dtype("sgd_dampening_factor", d);
  return {{{}, d}};
}
void kernel_sgd_dampening_factor(const KernelArgs& k) {
  write0(k.out[0], read0(k.in[0]) == 1.0 ? 1.0 : 1.0 - k.attrs.f("dampening"));
}
const OpDef kSgdDampeningFactor{.name = "sgd_dampening_factor", .flags = kNoGrad,
                                .infer = infer_sgd_dampening_factor, .kernel = kernel_sgd_dampening_factor};
OpRegistrar r1(kAdamStepScalars), r2(kSgdDampeningFactor);

}  // namespace

std::vector<Tensor> adam_step_scalars(const Tensor& step, const Tensor& lr, double beta1, double beta2, DType dtype) {
  return dispatch(kAdamStepScalars, {step, lr}, Attrs{{"beta1", beta1}, {"beta2", beta2}, {"dtype", dtype}});
}

Tensor sgd_dampening_factor(const Tensor& step, double dampening, DType dtype) {
  return dispatch1(kSgdDampeningFactor, {step}, Attrs{{"dampening", dampening}, {"dtype", dtype}});
}

}  // namespace terra
