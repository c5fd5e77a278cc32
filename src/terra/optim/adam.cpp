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
  // One op for every parameter with a gradient (fused_adam_: the same float operations per element
  // as torch's Adam, parameter after parameter). Its step count is counted there.
  std::vector<Tensor> ps, gs, ms, vs, ts;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    ps.push_back(params_[i]);
    gs.push_back(g);
    ms.push_back(exp_avg_[i]);
    vs.push_back(exp_avg_sq_[i]);
    ts.push_back(param_step(i));
  }
  if (ps.empty()) return;
  // lr: float64 0-d, fed once per step.
  fused_adam_(ps, gs, ms, vs, ts, scalar_tensor(lr_, DType::Float64), beta1, beta2, eps, weight_decay, decoupled_);
}

}  // namespace terra::optim
