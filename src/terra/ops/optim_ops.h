// Optimizer scalars computed in-graph from step-count tensors, so every value that depends on how
// many steps ran is part of the graph and rolls back with the variables when a step fails.
#pragma once
#include <vector>

#include "terra/core/tensor.h"

namespace terra {

// Adam's per-step factors from the float64 0-d step count t (already counting this step) and the
// float64 0-d learning rate: {sqrt(1 - beta2^t), -lr / (1 - beta1^t)}, computed in double as
// torch's host code does, each rounded once to a 0-d tensor of `dtype` (the parameter's).
std::vector<Tensor> adam_step_scalars(const Tensor& step, const Tensor& lr, double beta1, double beta2, DType dtype);

// SGD's dampening factor for the momentum update: 1 on the first step (t == 1), else 1 - dampening,
// as a 0-d tensor of `dtype`.
Tensor sgd_dampening_factor(const Tensor& step, double dampening, DType dtype);

}  // namespace terra
