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
  Tensor lr;  // float64 0-d, fed once per step and shared by every parameter's update
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (!lr.defined()) lr = scalar_tensor(lr_, DType::Float64);
    // Fused in-place ops with the float operations of the chain they replace: d = g + p wd;
    // buf.mul_(momentum).add_(d) (or += d * factor); p += (nesterov ? d + buf momentum : buf) * -lr.
    const Tensor no_tensor;
    if (momentum == 0.0) {
      sgd_param_(p, lr, g, no_tensor, 0.0, weight_decay);
      continue;
    }
    const Tensor& buf = momentum_buffers_[i];
    // buf starts at zero, so momentum * buf + d is torch's "buf = d" on the first step; the op
    // sequence is the same on every step, only the factor differs.
    Tensor factor = dampening == 0.0 ? Tensor() : sgd_dampening_factor(count_param_step(i), dampening, g.dtype());
    sgd_momentum_(buf, g, momentum, factor, weight_decay != 0.0 ? p : no_tensor, weight_decay);
    // Nesterov recomputes d from g (and p, not yet updated) instead of keeping it alive.
    sgd_param_(p, lr, nesterov ? g : no_tensor, buf, momentum, weight_decay);
  }
}

}  // namespace terra::optim
