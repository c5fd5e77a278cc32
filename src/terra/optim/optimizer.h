// Optimizer base. All state (momentum buffers, Adam moments, step counters) lives in tensors created
// once at construction and updated in place with ordinary ops under NoGradGuard, so the graph
// modes treat it as variables and a step that fails on the runner leaves it as eager would. No
// host counter influences a value: factors that depend on the step count (bias corrections,
// dampening) are computed by ops from the count tensors. step() never reads a tensor value back.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "terra/core/tensor.h"

namespace terra::optim {

class Optimizer {
 public:
  // `who` names the optimizer in error messages. Parameters must be defined floating leaf tensors.
  Optimizer(std::vector<Tensor> params, double lr, const char* who);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Sets every parameter's grad to undefined (torch's set_to_none = true); parameters without a
  // gradient are skipped by step().
  void zero_grad();
  virtual void step() = 0;

  const std::vector<Tensor>& params() const { return params_; }
  double lr() const { return lr_; }
  void set_lr(double lr);
  // Number of step() calls so far, as a float64 0-d tensor and read back (a fetch point).
  const Tensor& step_tensor() const { return step_tensor_; }
  int64_t step_count() const;
  // Per-parameter step counts (float64 0-d; a step where the parameter had no gradient does not
  // count), kept by the optimizers whose update depends on them (Adam; SGD with dampening), else empty.
  const std::vector<Tensor>& param_step_tensors() const { return param_steps_; }
  // Every state tensor this optimizer updates in place (for checkpoints and the graph modes).
  virtual std::vector<Tensor> state() const;

 protected:
  // Counts the step in step_tensor(); call once at the start of step().
  void begin_step();
  // Creates a zero count per parameter (constructors of optimizers that need them).
  void make_param_step_tensors();
  // Parameter i's step count, counted by the optimizer's fused update (fused_adam_, fused_sgd_).
  const Tensor& param_step(size_t i) const { return param_steps_.at(i); }

  std::vector<Tensor> params_;
  double lr_;
  Tensor step_tensor_;
  std::vector<Tensor> param_steps_;
  std::string who_;
};

}  // namespace terra::optim
