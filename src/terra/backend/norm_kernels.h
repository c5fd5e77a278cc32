// Normalization kernels; the backend folder provides them. Optional inputs are present or absent
// as the attrs say (has_weight, has_bias, use_running), in this order after x.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// in: x [N, C, ...], [weight C], [bias C], [running_mean C, running_var C] (when use_running)
// out: y, save_mean [C], save_invstd [C]. Attrs: eps, has_weight, has_bias, use_running.
void batch_norm(const KernelArgs& k);
// in: grad_y, x, save_mean, save_invstd, [weight]   out: grad_x, grad_weight [C], grad_bias [C].
// Attrs: has_weight, use_running (statistics were constants: no mean/var terms).
void batch_norm_backward(const KernelArgs& k);
// in: x [..., D...], [weight D...], [bias D...]   out: y, save_mean [outer], save_invstd [outer].
// Attrs: eps, has_weight, has_bias; the normalized part is weight's shape, i.e. out[1]'s complement.
void layer_norm(const KernelArgs& k);
// in: grad_y, x, save_mean, save_invstd, [weight]   out: grad_x, grad_weight, grad_bias.
void layer_norm_backward(const KernelArgs& k);

}  // namespace terra::kernels
