#include "terra/optim/optimizer.h"

#include <cmath>
#include <stdexcept>

#include "terra/autograd/grad_mode.h"
#include "terra/ops/creation.h"

namespace terra::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* who)
    : params_(std::move(params)), lr_(lr), who_(who) {
  set_lr(lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    std::string at = "[optim::" + who_ + "] parameter " + std::to_string(i);
    if (!p.defined()) throw std::invalid_argument(at + " is undefined");
    if (!is_floating(p.dtype())) throw std::invalid_argument(at + " is not a floating tensor");
    if (!p.is_leaf()) throw std::invalid_argument(at + " of shape " + shape_str(p.shape()) + " is not a leaf tensor");
  }
  step_tensor_ = zeros({}, DType::Float64);
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0.0) || !std::isfinite(lr))
    throw std::invalid_argument("[optim::" + who_ + "] invalid learning rate " + std::to_string(lr));
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
}

int64_t Optimizer::step_count() const { return int64_t(step_tensor_.item<double>()); }

std::vector<Tensor> Optimizer::state() const {
  std::vector<Tensor> s{step_tensor_};
  s.insert(s.end(), param_steps_.begin(), param_steps_.end());
  return s;
}

void Optimizer::begin_step() {
  NoGradGuard ng;
  step_tensor_.add_(1.0);
}

void Optimizer::make_param_step_tensors() {
  NoGradGuard ng;
  param_steps_.clear();
  for (size_t i = 0; i < params_.size(); ++i) param_steps_.push_back(zeros({}, DType::Float64));
}

}  // namespace terra::optim
