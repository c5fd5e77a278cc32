// Loss kernels (ops/loss.cpp defines the ops); the backend folder provides them. nll_loss sees its
// input as cross_entropy does (XentShape: [n, c, r], class dim in the middle; targets [n, r]);
// operands may be strided, and the targets were checked (check_targets) before the call.
#pragma once
#include <cstdint>

#include "terra/backend/cross_entropy_kernels.h"
#include "terra/core/op.h"

namespace terra::kernels {

// Reads the targets (one serial pass), checking every class index; returns the number of
// non-ignored ones. Kernels and check_values hooks share it: one message ("[nll_loss] target ...")
// everywhere, cross_entropy included.
int64_t check_targets(const Tensor& targets, int64_t classes, int64_t ignore);
// out: [n, r] (none) or [] = -x[target] per row (0 on ignored rows), summed (sum) or averaged over
// `used` rows (mean) in row order.
void nll_loss(const Tensor& x, const Tensor& targets, const XentShape& s, Tensor& out);
// out [n, c, r]: -grad_row * (1 / used for mean) at each row's target, 0 elsewhere and on ignored
// rows. grad: [n, r] (none) or [].
void nll_loss_backward(const Tensor& grad, const Tensor& targets, const XentShape& s, Tensor& out);
// in: x, t (one shape, one floating dtype)   out: max(x, 0) - x * t + log1p(exp(-|x|)), elementwise.
void binary_cross_entropy_with_logits(const KernelArgs& k);
// in: g, x, t   out: g * (sigmoid(x) - t), elementwise.
void binary_cross_entropy_with_logits_backward(const KernelArgs& k);

}  // namespace terra::kernels
