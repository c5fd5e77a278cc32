#include "terra/nn/norm.h"

#include <stdexcept>
#include <string>

#include "terra/ops/creation.h"
#include "terra/ops/norm.h"

namespace terra::nn {

BatchNorm2d::BatchNorm2d(int64_t n, double eps, double momentum, bool affine)
    : num_features(n), eps(eps), momentum(momentum) {
  if (n <= 0) throw std::invalid_argument("[nn::BatchNorm2d] num_features must be positive, got " + std::to_string(n));
  if (affine) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
  }
  running_mean = register_buffer("running_mean", zeros({n}));
  running_var = register_buffer("running_var", ones({n}));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (x.dim() != 4)
    throw std::invalid_argument("[nn::BatchNorm2d] expected a 4-D input [N, C, H, W], got " + shape_str(x.shape()));
  if (x.shape()[1] != num_features)
    throw std::invalid_argument("[nn::BatchNorm2d] input " + shape_str(x.shape()) + " has " +
                                std::to_string(x.shape()[1]) + " channels, expected " + std::to_string(num_features));
  return terra::batch_norm(x, weight, bias, running_mean, running_var, is_training(), momentum, eps);
}

Tensor BatchNorm1d::forward(const Tensor& x) {
  if (x.dim() != 2 && x.dim() != 3)
    throw std::invalid_argument("[nn::BatchNorm1d] expected a 2-D [N, C] or 3-D [N, C, L] input, got " +
                                shape_str(x.shape()));
  if (x.shape()[1] != num_features)
    throw std::invalid_argument("[nn::BatchNorm1d] input " + shape_str(x.shape()) + " has " +
                                std::to_string(x.shape()[1]) + " channels, expected " + std::to_string(num_features));
  return terra::batch_norm(x, weight, bias, running_mean, running_var, is_training(), momentum, eps);
}

LayerNorm::LayerNorm(int64_t dim, double eps, bool affine) : LayerNorm(Shape{dim}, eps, affine) {}

LayerNorm::LayerNorm(Shape shape, double eps, bool affine) : normalized_shape(std::move(shape)), eps(eps) {
  if (normalized_shape.empty())
    throw std::invalid_argument("[nn::LayerNorm] normalized_shape must not be empty");
  for (int64_t d : normalized_shape)
    if (d <= 0)
      throw std::invalid_argument("[nn::LayerNorm] normalized_shape " + shape_str(normalized_shape) +
                                  " must be positive");
  if (affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    bias = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return terra::layer_norm(x, normalized_shape, weight, bias, eps); }

}  // namespace terra::nn
