// 2-D convolution kernels (NCHW, weight [out, in/groups, kh, kw]); the backend folder provides them.
// Attrs of every kernel: stride, padding, dilation (2 ints each), groups. Output shapes come from
// the op's inference (k.out), so the kernels need no shape attrs.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

void conv2d(const KernelArgs& k);                  // in: x, w[, b]   out: y
void conv2d_backward_input(const KernelArgs& k);   // in: grad_y, w   out: grad_x
void conv2d_backward_weight(const KernelArgs& k);  // in: grad_y, x   out: grad_w
// Transposed conv = conv2d_backward_input of (x, w) plus bias; w is [in, out/groups, kh, kw].
void conv_transpose2d(const KernelArgs& k);        // in: x, w[, b]   out: y

}  // namespace terra::kernels
