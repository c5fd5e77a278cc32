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

// Fused in-place updates: one op each for what the optimizers ran as chains of mul_/add_/sqrt/div
// ops, with the same float operations and roundings (bit-identical results, far fewer ops per
// step). Tensors must match the updated tensor's shape and dtype; no gradient (NoGradGuard).
// `param` (optional): coupled weight decay, the gradient used is grad + param * weight_decay.

// exp_avg = exp_avg * beta1 + grad * (1 - beta1), as exp_avg.mul_(beta1).add_(grad, 1 - beta1).
void adam_exp_avg_(const Tensor& exp_avg, const Tensor& grad, double beta1, const Tensor& param = {},
                   double weight_decay = 0.0);
// exp_avg_sq = exp_avg_sq * beta2 + grad * (grad * (1 - beta2)).
void adam_exp_avg_sq_(const Tensor& exp_avg_sq, const Tensor& grad, double beta2, const Tensor& param = {},
                      double weight_decay = 0.0);
// param += (exp_avg / (sqrt(exp_avg_sq) / sc[0] + eps)) * sc[1], sc = adam_step_scalars(..., lr, ...);
// decoupled_weight_decay != 0 (AdamW) first scales param by 1 - lr * decoupled_weight_decay (lr:
// the float64 0-d learning rate).
void adam_param_(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const std::vector<Tensor>& step_scalars, double eps, const Tensor& lr,
                 double decoupled_weight_decay = 0.0);
// buf = buf * momentum + d, d = grad (+ param * weight_decay), times dampening_factor
// (sgd_dampening_factor, param's dtype) when given.
void sgd_momentum_(const Tensor& buf, const Tensor& grad, double momentum, const Tensor& dampening_factor = {},
                   const Tensor& param = {}, double weight_decay = 0.0);
// param += d * -lr with d = grad (+ param * weight_decay when weight_decay != 0); with a momentum
// buffer d = buf, or d + buf * momentum when grad is also given (Nesterov). lr: float64 0-d.
void sgd_param_(const Tensor& param, const Tensor& lr, const Tensor& grad, const Tensor& buf = {},
                double momentum = 0.0, double weight_decay = 0.0);

// The whole update of an optimizer in one op, for the parameters that have a gradient: what
// Adam/AdamW (and SGD) ran as a few ops per parameter, with the same float operations per element
// and the parameters in the same order, so the bits are the same; one op per step instead of
// ~5 per parameter is what graph modes and eager dispatch pay for. Writes in place every
// parameter, exp_avg, exp_avg_sq and step count (the count of this step is added here: steps[i]
// holds the parameter's count before the step). lr: float64 0-d. decoupled: AdamW's weight decay.
void fused_adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<Tensor>& steps, const Tensor& lr, double beta1, double beta2, double eps,
                 double weight_decay, bool decoupled);
// SGD's update for every parameter: momentum_buffers when momentum != 0 (else empty), steps (the
// dampening factor's counts) when momentum and dampening are both != 0 (else empty).
void fused_sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& momentum_buffers, const std::vector<Tensor>& steps, const Tensor& lr,
                double momentum, double dampening, double weight_decay, bool nesterov);

}  // namespace terra
