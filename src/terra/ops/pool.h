// 2-D pooling and nearest upsampling (NCHW), with the ops their gradients use.
#pragma once
#include <array>
#include <cstdint>

#include "terra/core/tensor.h"

namespace terra {

using Int2 = std::array<int64_t, 2>;

// stride {0, 0} means stride = kernel (torch's default). Padding is implicit -inf and at most half
// the kernel. No ceil_mode.
Tensor max_pool2d(const Tensor& x, Int2 kernel, Int2 stride = {0, 0}, Int2 padding = {0, 0});
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
// count_include_pad = true divides by the whole window, as torch's default.
Tensor avg_pool2d(const Tensor& x, Int2 kernel, Int2 stride = {0, 0}, Int2 padding = {0, 0},
                  bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0,
                  bool count_include_pad = true);
// Bins [floor(i*H/oh), ceil((i+1)*H/oh)), any output size.
Tensor adaptive_avg_pool2d(const Tensor& x, Int2 output_size);
// Torch's nearest rule: src = floor(dst * in/out).
Tensor upsample_nearest2d(const Tensor& x, Int2 output_size);
// Output size floor(in * scale); sources use the in/out rule (equal to torch's for integer scales).
Tensor upsample_nearest2d(const Tensor& x, double scale_factor);

// Gradient building blocks (ordinary ops).
Tensor max_pool2d_backward(const Tensor& grad_y, const Tensor& indices, const Shape& input_shape);
Tensor avg_pool2d_backward(const Tensor& grad_y, const Shape& input_shape, Int2 kernel, Int2 stride, Int2 padding,
                           bool count_include_pad);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_y, const Shape& input_shape);
Tensor upsample_nearest2d_backward(const Tensor& grad_y, const Shape& input_shape);

}  // namespace terra
