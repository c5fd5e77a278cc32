// Fused optimizer update kernels; the backend folder provides them. Each writes input 0 in place
// with exactly the float operations, operand order and scalar roundings of the op chain it replaces
// (optim/adam.cpp, optim/sgd.cpp before fusion), so every mode keeps eager's bits. Optional inputs
// are present or absent as the bool attrs say, in the order listed.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// in: m, g, [p] (has_param). Attrs: beta1, weight_decay, has_param.
// d = has_param ? g + p * wd : g;  m = m * beta1 + d * (1 - beta1)  (no multiply when 1 - beta1 == 1).
void adam_exp_avg(const KernelArgs& k);
// in: v, g, [p] (has_param). Attrs: beta2, weight_decay, has_param.
// d as above;  v = v * beta2 + d * (d * (1 - beta2)).
void adam_exp_avg_sq(const KernelArgs& k);
// in: p, m, v, sc0, sc1 (adam_step_scalars, p's dtype), lr (float64 0-d). Attrs: eps, weight_decay.
// weight_decay != 0 (AdamW): p = p * (1 - lr * wd) first;  p = p + (m / (sqrt(v) / sc0 + eps)) * sc1.
void adam_param(const KernelArgs& k);
// in: buf, g, [p] (has_param), [factor] (has_dampening: sgd_dampening_factor, p's dtype).
// Attrs: momentum, weight_decay, has_param, has_dampening.
// d as above;  buf = buf * momentum + (has_dampening ? d * factor : d).
void sgd_momentum(const KernelArgs& k);
// in: p, lr (float64 0-d), [g] (has_grad), [buf] (has_buffer). Attrs: momentum, weight_decay,
// has_grad, has_buffer.  d = g (+ p * wd when wd != 0); with a buffer d = has_grad ? d + buf *
// momentum (Nesterov) : buf;  p = p + d * (-lr).
void sgd_param(const KernelArgs& k);

// The optimizers' whole update in one call (ops/optim_ops.h fused_adam_ / fused_sgd_): for each
// parameter in turn, exactly the per-parameter ops above, in the order the optimizers called them.
// fused_adam in: p[n], m[n], v[n], t[n] (float64 0-d step counts, counted here), g[n], lr.
// Attrs: n, beta1, beta2, eps, weight_decay, decoupled.
void fused_adam(const KernelArgs& k);
// fused_sgd in: p[n], buf[n] (momentum != 0), t[n] (momentum and dampening != 0), g[n], lr.
// Attrs: n, momentum, dampening, weight_decay, nesterov.
void fused_sgd(const KernelArgs& k);

}  // namespace terra::kernels
