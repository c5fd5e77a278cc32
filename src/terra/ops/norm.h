// Batch and layer normalization, with the ops their gradients use.
#pragma once
#include <vector>

#include "terra/core/tensor.h"

namespace terra {

// x [N, C, ...]. Training: normalizes with the batch statistics and, when running_mean/var are
// defined, updates them in place (ordinary in-place ops under NoGradGuard; running_var gets the
// unbiased batch variance, as torch). Eval: uses the running statistics. weight/bias may be undefined.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);
// Normalizes over the trailing dims given by normalized_shape; weight/bias have that shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

// The forward ops with all their outputs: {y, save_mean, save_invstd}.
std::vector<Tensor> batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                       const Tensor& running_mean, const Tensor& running_var, bool use_running,
                                       double eps);
std::vector<Tensor> layer_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                       const Tensor& bias, double eps);

// Gradient building blocks (ordinary ops): {grad_x, grad_weight, grad_bias}. weight may be undefined.
// use_running: the statistics were constants (eval), so grad_x is just grad_y * weight * invstd.
std::vector<Tensor> batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& save_mean,
                                        const Tensor& save_invstd, const Tensor& weight, bool use_running);
std::vector<Tensor> layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& save_mean,
                                        const Tensor& save_invstd, const Tensor& weight,
                                        const Shape& normalized_shape);

}  // namespace terra
