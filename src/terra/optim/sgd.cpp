#include "terra/optim/sgd.h"

#include <stdexcept>
#include <string>

#include "terra/autograd/grad_mode.h"
#include "terra/ops/creation.h"
#include "terra/ops/optim_ops.h"

namespace terra::optim {

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double dampening, double weight_decay, bool nesterov)
    : Optimizer(std::move(params), lr, "SGD"),
      momentum(momentum),
      dampening(dampening),
      weight_decay(weight_decay),
      nesterov(nesterov) {
  if (momentum < 0.0) throw std::invalid_argument("[optim::SGD] invalid momentum " + std::to_string(momentum));
  if (weight_decay < 0.0)
    throw std::invalid_argument("[optim::SGD] invalid weight_decay " + std::to_string(weight_decay));
  if (nesterov && (momentum <= 0.0 || dampening != 0.0))
    throw std::invalid_argument("[optim::SGD] nesterov momentum requires a momentum and zero dampening");
  // Only the dampened momentum update depends on the step count (its first step differs).
  if (momentum != 0.0 && dampening != 0.0) make_param_step_tensors();
  if (momentum != 0.0) {
    NoGradGuard ng;
    for (const Tensor& p : params_) momentum_buffers_.push_back(zeros_like(p));
  }
}

std::vector<Tensor> SGD::state() const {
  std::vector<Tensor> s = Optimizer::state();
  s.insert(s.end(), momentum_buffers_.begin(), momentum_buffers_.end());
  return s;
}

void SGD::step() {
  begin_step();
  NoGradGuard ng;
  // One op for every parameter with a gradient (fused_sgd_: d = g + p wd; buf = buf momentum + d
  // (times the dampening factor); p += (nesterov ? d + buf momentum : buf) * -lr, per parameter).
  std::vector<Tensor> ps, gs, bufs, ts;
  const bool counted = momentum != 0.0 && dampening != 0.0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    ps.push_back(params_[i]);
    gs.push_back(g);
    if (momentum != 0.0) bufs.push_back(momentum_buffers_[i]);
    if (counted) ts.push_back(param_step(i));
  }
  if (ps.empty()) return;
  // lr: float64 0-d, fed once per step.
  fused_sgd_(ps, gs, bufs, ts, scalar_tensor(lr_, DType::Float64), momentum, dampening, weight_decay, nesterov);
}

}  // namespace terra::optim
