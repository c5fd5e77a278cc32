// Optimizer base. State (momentum buffers, Adam moments, the step counter) lives in tensors created
// once at construction and updated in place with ordinary ops under NoGradGuard, so the graph
// modes can treat it as variables. step() never reads a tensor value back to the host: per-step
// factors (learning rate, bias corrections) are host doubles passed to the ops as scalars.
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
  // Number of step() calls so far (host counter) and the same count as a float64 0-d tensor.
  int64_t step_count() const { return steps_; }
  const Tensor& step_tensor() const { return step_tensor_; }
  // Every state tensor this optimizer updates in place (for checkpoints and the graph modes).
  virtual std::vector<Tensor> state() const { return {step_tensor_}; }

 protected:
  // Counts the step in both counters; call once at the start of step().
  void begin_step();

  std::vector<Tensor> params_;
  double lr_;
  int64_t steps_ = 0;
  Tensor step_tensor_;
  std::string who_;
};

}  // namespace terra::optim
