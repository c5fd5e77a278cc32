#include "terra/optim/adam.h"

#include <stdexcept>
#include <string>

#include "terra/autograd/grad_mode.h"
#include "terra/ops/creation.h"
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
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!lr.defined()) lr = scalar_tensor(lr_, DType::Float64);
    const Tensor& t = count_param_step(i);
    // Three fused in-place ops with the float operations of the 13-op chain they replace
    // (p.mul_(1 - lr wd) or g + p wd; m.mul_(b1).add_(g, 1 - b1); v.mul_(b2) += g (g (1 - b2));
    // p += (m / (sqrt(v) / sc0 + eps)) sc1): the same bits.
    const bool coupled = weight_decay != 0.0 && !decoupled_;
    const Tensor no_param;
    const Tensor& wd_param = coupled ? p : no_param;
    const Tensor& m = exp_avg_[i];
    const Tensor& v = exp_avg_sq_[i];
    adam_exp_avg_(m, g, beta1, wd_param, weight_decay);
    adam_exp_avg_sq_(v, g, beta2, wd_param, weight_decay);
    // Bias corrections from the count tensor (in-graph), in torch's order of operations:
    // sc = {sqrt(1 - beta2^t), -lr / (1 - beta1^t)}, each rounded once to p's dtype.
    std::vector<Tensor> sc = adam_step_scalars(t, lr, beta1, beta2, p.dtype());
    adam_param_(p, m, v, sc, eps, lr, decoupled_ ? weight_decay : 0.0);
  }
}

}  // namespace terra::optim
