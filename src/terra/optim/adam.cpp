#include "terra/optim/adam.h"

#include <stdexcept>
#include <string>

#include "terra/autograd/grad_mode.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/creation.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/optim_ops.h"

namespace terra::optim {

Adam::Adam(std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps, double weight_decay)
    : Adam(std::move(params), lr, betas, eps, weight_decay, false, "Adam") {}

Adam::Adam(std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps, double weight_decay,
           bool decoupled, const char* who)
    : Optimizer(std::move(params), lr, who),
      beta1(betas.first),
      beta2(betas.second),
      eps(eps),
      weight_decay(weight_decay),
      decoupled_(decoupled) {
  auto bad = [&](const std::string& what) { throw std::invalid_argument("[optim::" + who_ + "] invalid " + what); };
  if (!(beta1 >= 0.0 && beta1 < 1.0)) bad("beta1 " + std::to_string(beta1));
  if (!(beta2 >= 0.0 && beta2 < 1.0)) bad("beta2 " + std::to_string(beta2));
  if (!(eps >= 0.0)) bad("eps " + std::to_string(eps));
  if (!(weight_decay >= 0.0)) bad("weight_decay " + std::to_string(weight_decay));
  NoGradGuard ng;
  for (const Tensor& p : params_) {
    exp_avg_.push_back(zeros_like(p));
    exp_avg_sq_.push_back(zeros_like(p));
  }
  make_param_step_tensors();
}

std::vector<Tensor> Adam::state() const {
  std::vector<Tensor> s = Optimizer::state();
  s.insert(s.end(), exp_avg_.begin(), exp_avg_.end());
  s.insert(s.end(), exp_avg_sq_.begin(), exp_avg_sq_.end());
  return s;
}

void Adam::step() {
  begin_step();
  NoGradGuard ng;
  Tensor lr;  // float64 0-d, fed once per step and shared by every parameter's step scalars
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!lr.defined()) lr = scalar_tensor(lr_, DType::Float64);
    const Tensor& t = count_param_step(i);
    if (weight_decay != 0.0) {
      if (decoupled_) p.mul_(1.0 - lr_ * weight_decay);
      else g = g + p * weight_decay;
    }
    const Tensor& m = exp_avg_[i];
    const Tensor& v = exp_avg_sq_[i];
    m.mul_(beta1).add_(g, 1.0 - beta1);
    v.mul_(beta2);
    add_inplace(v, g * (g * (1.0 - beta2)));
    // Bias corrections from the count tensor (in-graph), in torch's order of operations:
    // sc = {sqrt(1 - beta2^t), -lr / (1 - beta1^t)}, each rounded once to p's dtype.
    std::vector<Tensor> sc = adam_step_scalars(t, lr, beta1, beta2, p.dtype());
    Tensor denom = sqrt(v) / sc[0] + eps;
    add_inplace(p, (m / denom) * sc[1]);
  }
}

}  // namespace terra::optim
