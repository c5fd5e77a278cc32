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

TensorMetas infer_adam_step_scalars(std::span<const Tensor> in, const Attrs& a) {
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

TensorMetas infer_sgd_dampening_factor(std::span<const Tensor> in, const Attrs& a) {
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
TensorMetas same_as_target(std::span<const Tensor> in) { return {{in[0].shape(), in[0].dtype()}}; }

// m or v: in {state, grad, [param]}.
TensorMetas infer_moment(const char* op, const char* state, std::span<const Tensor> in, const Attrs& a) {
  const bool hp = a.b("has_param");
  check_target(op, state, in, hp ? 3 : 2);
  check_like(op, "grad", in[1], state, in[0]);
  if (hp) check_like(op, "param", in[2], state, in[0]);
  return same_as_target(in);
}
TensorMetas infer_adam_exp_avg(std::span<const Tensor> in, const Attrs& a) {
  return infer_moment("adam_exp_avg_", "exp_avg", in, a);
}
TensorMetas infer_adam_exp_avg_sq(std::span<const Tensor> in, const Attrs& a) {
  return infer_moment("adam_exp_avg_sq_", "exp_avg_sq", in, a);
}
// in {param, exp_avg, exp_avg_sq, sc0, sc1, lr}
TensorMetas infer_adam_param(std::span<const Tensor> in, const Attrs&) {
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
TensorMetas infer_sgd_momentum(std::span<const Tensor> in, const Attrs& a) {
  const char* op = "sgd_momentum_";
  const bool hp = a.b("has_param"), hd = a.b("has_dampening");
  check_target(op, "momentum buffer", in, 2 + hp + hd);
  check_like(op, "grad", in[1], "momentum buffer", in[0]);
  if (hp) check_like(op, "param", in[2], "momentum buffer", in[0]);
  if (hd) check_scalar(op, "dampening factor", in[2 + hp], in[0].dtype());
  return same_as_target(in);
}
// in {param, lr, [grad], [buf]}
TensorMetas infer_sgd_param(std::span<const Tensor> in, const Attrs& a) {
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

// ---- the whole optimizer update in one op (kernels::fused_adam / fused_sgd) ----

// Parameter i's operand `what` (the tensors of one role are in[first, first + n)) against param i.
// Inference runs on every call in every mode: the operand's name is spelled only for an error.
void check_each_like(const char* op, const char* what, std::span<const Tensor> in, size_t first, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = in[first + i];
    if (t.shape() == in[i].shape() && t.dtype() == in[i].dtype()) continue;
    check_like(op, (std::string(what) + " " + std::to_string(i)).c_str(), t, "its param", in[i]);
  }
}
void check_counts(const char* op, std::span<const Tensor> in, size_t first, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = in[first + i];
    if (t.dim() == 0 && t.dtype() == DType::Float64) continue;
    check_scalar(op, ("step count " + std::to_string(i)).c_str(), t, DType::Float64);
  }
}
// The parameters (in[0, n)), and the input count the roles call for.
size_t check_params(const char* op, std::span<const Tensor> in, const Attrs& a, size_t roles) {
  const int64_t n = a.i("n");
  if (n < 1) throw std::invalid_argument(name_of(op, "needs at least one parameter, got ") + std::to_string(n));
  if (in.size() != roles * size_t(n) + 1)
    throw std::invalid_argument(name_of(op, "expected ") + std::to_string(roles * size_t(n) + 1) + " inputs for " +
                                std::to_string(n) + " parameters, got " + std::to_string(in.size()));
  for (size_t i = 0; i < size_t(n); ++i)
    if (!is_floating(in[i].dtype()))
      throw std::invalid_argument(name_of(op, "param ") + std::to_string(i) + " must be floating, got " +
                                  dtype_name(in[i].dtype()) + " of shape " + shape_str(in[i].shape()));
  return size_t(n);
}
TensorMetas metas_of(std::span<const Tensor> in, size_t count) {
  TensorMetas out;
  out.reserve(count);
  for (size_t k = 0; k < count; ++k) out.push_back({in[k].shape(), in[k].dtype()});
  return out;
}

// in {p[n], m[n], v[n], t[n], g[n], lr}; writes p, m, v, t.
TensorMetas infer_fused_adam(std::span<const Tensor> in, const Attrs& a) {
  const char* op = "fused_adam_";
  const size_t n = check_params(op, in, a, 5);
  check_each_like(op, "exp_avg", in, n, n);
  check_each_like(op, "exp_avg_sq", in, 2 * n, n);
  check_counts(op, in, 3 * n, n);
  check_each_like(op, "grad", in, 4 * n, n);
  check_scalar(op, "learning rate", in[5 * n], DType::Float64);
  return metas_of(in, 4 * n);
}
uint32_t fused_adam_targets(const Attrs& a) { return uint32_t(4 * a.i("n")); }

// Roles per parameter before the grads: the param, a momentum buffer, a step count.
size_t sgd_roles(const Attrs& a) {
  const bool buf = a.f("momentum") != 0.0;
  return 1 + buf + (buf && a.f("dampening") != 0.0);
}
// in {p[n], [buf[n]], [t[n]], g[n], lr}; writes p, buf, t.
TensorMetas infer_fused_sgd(std::span<const Tensor> in, const Attrs& a) {
  const char* op = "fused_sgd_";
  const size_t r = sgd_roles(a), n = check_params(op, in, a, r + 1);
  if (r > 1) check_each_like(op, "momentum buffer", in, n, n);
  if (r > 2) check_counts(op, in, 2 * n, n);
  check_each_like(op, "grad", in, r * n, n);
  check_scalar(op, "learning rate", in[(r + 1) * n], DType::Float64);
  return metas_of(in, r * n);
}
uint32_t fused_sgd_targets(const Attrs& a) { return uint32_t(sgd_roles(a) * size_t(a.i("n"))); }

const OpDef kFusedAdam{.name = "fused_adam_", .flags = kInplace | kNoGrad, .infer = infer_fused_adam,
                       .kernel = kernels::fused_adam, .targets = fused_adam_targets};
const OpDef kFusedSgd{.name = "fused_sgd_", .flags = kInplace | kNoGrad, .infer = infer_fused_sgd,
                      .kernel = kernels::fused_sgd, .targets = fused_sgd_targets};
OpRegistrar r8(kFusedAdam), r9(kFusedSgd);

// The tensors of each role, one after the other (an op's input list).
std::vector<Tensor> concat(std::initializer_list<const std::vector<Tensor>*> roles, const Tensor& last) {
  size_t total = 1;
  for (auto* r : roles) total += r->size();
  std::vector<Tensor> in;
  in.reserve(total);
  for (auto* r : roles) in.insert(in.end(), r->begin(), r->end());
  in.push_back(last);
  return in;
}
void check_role_size(const char* op, const char* what, const std::vector<Tensor>& v, size_t n) {
  if (v.size() != n)
    throw std::invalid_argument(name_of(op, what) + " lists " + std::to_string(v.size()) + " tensors for " +
                                std::to_string(n) + " parameters");
}

void moment(const OpDef& op, const Tensor& state, const Tensor& grad, const char* beta_name, double beta,
            const Tensor& param, double weight_decay) {
  std::vector<Tensor> in{state, grad};
  if (param.defined()) in.push_back(param);
  dispatch_effect(op, std::move(in),
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
  dispatch_effect(kAdamParam, {param, exp_avg, exp_avg_sq, step_scalars[0], step_scalars[1], lr},
                  Attrs{{"eps", eps}, {"weight_decay", decoupled_weight_decay}});
}

void fused_adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<Tensor>& steps, const Tensor& lr, double beta1, double beta2, double eps,
                 double weight_decay, bool decoupled) {
  const char* op = "fused_adam_";
  const size_t n = params.size();
  check_role_size(op, "grads", grads, n);
  check_role_size(op, "exp_avgs", exp_avgs, n);
  check_role_size(op, "exp_avg_sqs", exp_avg_sqs, n);
  check_role_size(op, "steps", steps, n);
  dispatch_effect(kFusedAdam, concat({&params, &exp_avgs, &exp_avg_sqs, &steps, &grads}, lr),
                  Attrs{{"n", int64_t(n)},
                        {"beta1", beta1},
                        {"beta2", beta2},
                        {"eps", eps},
                        {"weight_decay", weight_decay},
                        {"decoupled", decoupled}});
}

void fused_sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& momentum_buffers, const std::vector<Tensor>& steps, const Tensor& lr,
                double momentum, double dampening, double weight_decay, bool nesterov) {
  const char* op = "fused_sgd_";
  const size_t n = params.size();
  const bool buf = momentum != 0.0, count = buf && dampening != 0.0;
  check_role_size(op, "grads", grads, n);
  check_role_size(op, "momentum_buffers", momentum_buffers, buf ? n : 0);
  check_role_size(op, "steps", steps, count ? n : 0);
  dispatch_effect(kFusedSgd, concat({&params, &momentum_buffers, &steps, &grads}, lr),
                  Attrs{{"n", int64_t(n)},
                        {"momentum", momentum},
                        {"dampening", dampening},
                        {"weight_decay", weight_decay},
                        {"nesterov", nesterov}});
}

void sgd_momentum_(const Tensor& buf, const Tensor& grad, double momentum, const Tensor& dampening_factor,
                   const Tensor& param, double weight_decay) {
  std::vector<Tensor> in{buf, grad};
  if (param.defined()) in.push_back(param);
  if (dampening_factor.defined()) in.push_back(dampening_factor);
  dispatch_effect(kSgdMomentum, std::move(in),
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
  dispatch_effect(kSgdParam, std::move(in),
                  Attrs{{"momentum", momentum},
                        {"weight_decay", weight_decay},
                        {"has_grad", grad.defined()},
                        {"has_buffer", buf.defined()}});
}

}  // namespace terra
