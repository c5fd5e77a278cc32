// 2-D pooling and resampling kernels (NCHW). Output shapes come from the op's inference (k.out).
// Attrs: kernel, stride, padding (2 ints each) for max/avg pooling, plus count_include_pad for avg.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

void max_pool2d(const KernelArgs& k);                     // in: x         out: y, indices (int64, h*W+w)
void max_pool2d_backward(const KernelArgs& k);            // in: gy, idx   out: gx
// Its check_values hook: every index must address the input plane (the kernel scatters there).
void max_pool2d_backward_values(std::span<const Tensor> in, const Attrs& a);
void avg_pool2d(const KernelArgs& k);                     // in: x         out: y
void avg_pool2d_backward(const KernelArgs& k);            // in: gy        out: gx
void adaptive_avg_pool2d(const KernelArgs& k);            // in: x         out: y
void adaptive_avg_pool2d_backward(const KernelArgs& k);   // in: gy        out: gx
void upsample_nearest2d(const KernelArgs& k);             // in: x         out: y
void upsample_nearest2d_backward(const KernelArgs& k);    // in: gy        out: gx

}  // namespace terra::kernels
