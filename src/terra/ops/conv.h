// 2-D convolutions (NCHW; weight [out, in/groups, kh, kw]) and the ops their gradients use.
#pragma once
#include <array>
#include <cstdint>

#include "terra/core/tensor.h"

namespace terra {

using Int2 = std::array<int64_t, 2>;

// y = conv(x, w) + b. x [N, C, H, W], w [O, C/groups, kh, kw], b [O] or undefined.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, Int2 stride = {1, 1}, Int2 padding = {0, 0},
              Int2 dilation = {1, 1}, int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t padding = 0);

// Transposed conv (torch's weight layout [in, out/groups, kh, kw]); output size
// (H-1)*stride - 2*padding + dilation*(kh-1) + output_padding + 1.
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, Int2 stride = {1, 1},
                        Int2 padding = {0, 0}, Int2 output_padding = {0, 0}, int64_t groups = 1,
                        Int2 dilation = {1, 1});
// Same, with dilation before groups (the order nn::ConvTranspose2d calls it with).
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, Int2 stride, Int2 padding,
                        Int2 output_padding, Int2 dilation, int64_t groups = 1);

// Gradient building blocks (ordinary ops): grad of conv2d's input of shape `input_shape`, and of
// its weight of shape `weight_shape`, given the output gradient.
Tensor conv2d_backward_input(const Tensor& grad_y, const Tensor& w, const Shape& input_shape, Int2 stride,
                             Int2 padding, Int2 dilation, int64_t groups);
Tensor conv2d_backward_weight(const Tensor& grad_y, const Tensor& x, const Shape& weight_shape, Int2 stride,
                              Int2 padding, Int2 dilation, int64_t groups);

}  // namespace terra
