#include "terra/ops/optim_ops.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/backend/optim_kernels.h"
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

// ---- fused in-place updates (kernels in backend/optim_kernels.h) ----

std::string name_of(const char* op, const char* what) { return std::string("[") + op + "] " + what; }

// The target of the update (input 0) and the number of inputs its attrs call for.
void check_target(const char* op, const char* what, std::span<const Tensor> in, size_t n) {
  if (in.size() != n)
    throw std::runtime_error(name_of(op, "expected ") + std::to_string(n) + " inputs, got " + std::to_string(in.size()));
  if (!is_floating(in[0].dtype()))
    throw std::invalid_argument(name_of(op, what) + " must be floating, got " + dtype_name(in[0].dtype()) +
                                " of shape " + shape_str(in[0].shape()));
}
// A full-size operand: the target's shape and dtype, no broadcasting (all are per-parameter state).
void check_like(const char* op, const char* what, const Tensor& t, const char* target_name, const Tensor& target) {
  if (t.shape() != target.shape())
    throw std::invalid_argument(name_of(op, what) + " of shape " + shape_str(t.shape()) + " does not match " +
                                target_name + " of shape " + shape_str(target.shape()));
  if (t.dtype() != target.dtype())
    throw std::invalid_argument(name_of(op, what) + " dtype " + dtype_name(t.dtype()) + " differs from " +
                                target_name + "'s " + dtype_name(target.dtype()) + " (shape " +
                                shape_str(target.shape()) + ")");
}
void check_scalar(const char* op, const char* what, const Tensor& t, DType d) {
  if (t.dim() != 0 || t.dtype() != d)
    throw std::invalid_argument(name_of(op, what) + " must be a " + dtype_name(d) + " 0-d tensor, got " +
                                dtype_name(t.dtype()) + " of shape " + shape_str(t.shape()));
}
std::vector<TensorMeta> same_as_target(std::span<const Tensor> in) { return {{in[0].shape(), in[0].dtype()}}; }

// m or v: in {state, grad, [param]}.
std::vector<TensorMeta> infer_moment(const char* op, const char* state, std::span<const Tensor> in, const Attrs& a) {
  const bool hp = a.b("has_param");
  check_target(op, state, in, hp ? 3 : 2);
  check_like(op, "grad", in[1], state, in[0]);
  if (hp) check_like(op, "param", in[2], state, in[0]);
  return same_as_target(in);
}
std::vector<TensorMeta> infer_adam_exp_avg(std::span<const Tensor> in, const Attrs& a) {
  return infer_moment("adam_exp_avg_", "exp_avg", in, a);
}
std::vector<TensorMeta> infer_adam_exp_avg_sq(std::span<const Tensor> in, const Attrs& a) {
  return infer_moment("adam_exp_avg_sq_", "exp_avg_sq", in, a);
}
// in {param, exp_avg, exp_avg_sq, sc0, sc1, lr}
std::vector<TensorMeta> infer_adam_param(std::span<const Tensor> in, const Attrs&) {
  const char* op = "adam_param_";
  check_target(op, "param", in, 6);
  check_like(op, "exp_avg", in[1], "param", in[0]);
  check_like(op, "exp_avg_sq", in[2], "param", in[0]);
  check_scalar(op, "step scalar 0", in[3], in[0].dtype());
  check_scalar(op, "step scalar 1", in[4], in[0].dtype());
  check_scalar(op, "learning rate", in[5], DType::Float64);
  return same_as_target(in);
}
// in {buf, grad, [param], [dampening factor]}
std::vector<TensorMeta> infer_sgd_momentum(std::span<const Tensor> in, const Attrs& a) {
  const char* op = "sgd_momentum_";
  const bool hp = a.b("has_param"), hd = a.b("has_dampening");
  check_target(op, "momentum buffer", in, 2 + hp + hd);
  check_like(op, "grad", in[1], "momentum buffer", in[0]);
  if (hp) check_like(op, "param", in[2], "momentum buffer", in[0]);
  if (hd) check_scalar(op, "dampening factor", in[2 + hp], in[0].dtype());
  return same_as_target(in);
}
// in {param, lr, [grad], [buf]}
std::vector<TensorMeta> infer_sgd_param(std::span<const Tensor> in, const Attrs& a) {
  const char* op = "sgd_param_";
  const bool hg = a.b("has_grad"), hb = a.b("has_buffer");
  if (!hg && !hb) throw std::runtime_error(name_of(op, "needs a grad or a momentum buffer"));
  check_target(op, "param", in, 2 + hg + hb);
  check_scalar(op, "learning rate", in[1], DType::Float64);
  if (hg) check_like(op, "grad", in[2], "param", in[0]);
  if (hb) check_like(op, "momentum buffer", in[2 + hg], "param", in[0]);
  return same_as_target(in);
}

// In place with no gradient, as mul_: optimizers run them under NoGradGuard.
const OpDef kAdamExpAvg{.name = "adam_exp_avg_", .flags = kInplace | kNoGrad, .infer = infer_adam_exp_avg,
                        .kernel = kernels::adam_exp_avg};
const OpDef kAdamExpAvgSq{.name = "adam_exp_avg_sq_", .flags = kInplace | kNoGrad, .infer = infer_adam_exp_avg_sq,
                          .kernel = kernels::adam_exp_avg_sq};
const OpDef kAdamParam{.name = "adam_param_", .flags = kInplace | kNoGrad, .infer = infer_adam_param,
                       .kernel = kernels::adam_param};
const OpDef kSgdMomentum{.name = "sgd_momentum_", .flags = kInplace | kNoGrad, .infer = infer_sgd_momentum,
                         .kernel = kernels::sgd_momentum};
const OpDef kSgdParam{.name = "sgd_param_", .flags = kInplace | kNoGrad, .infer = infer_sgd_param,
                      .kernel = kernels::sgd_param};
OpRegistrar r3(kAdamExpAvg), r4(kAdamExpAvgSq), r5(kAdamParam), r6(kSgdMomentum), r7(kSgdParam);

void moment(const OpDef& op, const Tensor& state, const Tensor& grad, const char* beta_name, double beta,
            const Tensor& param, double weight_decay) {
  std::vector<Tensor> in{state, grad};
  if (param.defined()) in.push_back(param);
  dispatch(op, std::move(in),
           Attrs{{beta_name, beta}, {"weight_decay", weight_decay}, {"has_param", param.defined()}});
}

}  // namespace

std::vector<Tensor> adam_step_scalars(const Tensor& step, const Tensor& lr, double beta1, double beta2, DType dtype) {
  return dispatch(kAdamStepScalars, {step, lr}, Attrs{{"beta1", beta1}, {"beta2", beta2}, {"dtype", dtype}});
}

Tensor sgd_dampening_factor(const Tensor& step, double dampening, DType dtype) {
  return dispatch1(kSgdDampeningFactor, {step}, Attrs{{"dampening", dampening}, {"dtype", dtype}});
}

void adam_exp_avg_(const Tensor& exp_avg, const Tensor& grad, double beta1, const Tensor& param, double weight_decay) {
  moment(kAdamExpAvg, exp_avg, grad, "beta1", beta1, param, weight_decay);
}

void adam_exp_avg_sq_(const Tensor& exp_avg_sq, const Tensor& grad, double beta2, const Tensor& param,
                      double weight_decay) {
  moment(kAdamExpAvgSq, exp_avg_sq, grad, "beta2", beta2, param, weight_decay);
}

void adam_param_(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const std::vector<Tensor>& step_scalars, double eps, const Tensor& lr, double decoupled_weight_decay) {
  if (step_scalars.size() != 2)
    throw std::invalid_argument("[adam_param_] expected the 2 tensors of adam_step_scalars, got " +
                                std::to_string(step_scalars.size()));
  dispatch(kAdamParam, {param, exp_avg, exp_avg_sq, step_scalars[0], step_scalars[1], lr},
           Attrs{{"eps", eps}, {"weight_decay", decoupled_weight_decay}});
}

void sgd_momentum_(const Tensor& buf, const Tensor& grad, double momentum, const Tensor& dampening_factor,
                   const Tensor& param, double weight_decay) {
  std::vector<Tensor> in{buf, grad};
  if (param.defined()) in.push_back(param);
  if (dampening_factor.defined()) in.push_back(dampening_factor);
  dispatch(kSgdMomentum, std::move(in),
           Attrs{{"momentum", momentum},
                 {"weight_decay", weight_decay},
                 {"has_param", param.defined()},
                 {"has_dampening", dampening_factor.defined()}});
}

void sgd_param_(const Tensor& param, const Tensor& lr, const Tensor& grad, const Tensor& buf, double momentum,
                double weight_decay) {
  if (!grad.defined() && !buf.defined())
    throw std::invalid_argument("[sgd_param_] needs a grad or a momentum buffer (both undefined), param of shape " +
                                (param.defined() ? shape_str(param.shape()) : std::string("?")));
  std::vector<Tensor> in{param, lr};
  if (grad.defined()) in.push_back(grad);
  if (buf.defined()) in.push_back(buf);
  dispatch(kSgdParam, std::move(in),
           Attrs{{"momentum", momentum},
                 {"weight_decay", weight_decay},
                 {"has_grad", grad.defined()},
                 {"has_buffer", buf.defined()}});
}

}  // namespace terra
