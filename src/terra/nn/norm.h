// Normalization layers: BatchNorm2d / BatchNorm1d (running statistics as buffers) and LayerNorm.
#pragma once
#include <cstdint>

#include "terra/core/shape.h"
#include "terra/nn/module.h"

namespace terra::nn {

// Input [N, C, H, W]. Training: normalizes with the batch statistics and updates running_mean /
// running_var in place (momentum-weighted, unbiased variance); eval: uses the running stats.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "BatchNorm2d"; }

  int64_t num_features;
  double eps, momentum;
  Tensor weight, bias;                 // ones / zeros; undefined when affine = false
  Tensor running_mean, running_var;    // buffers: zeros / ones
};

// Input [N, C] or [N, C, L]; otherwise as BatchNorm2d.
class BatchNorm1d : public BatchNorm2d {
 public:
  using BatchNorm2d::BatchNorm2d;
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "BatchNorm1d"; }
};

// Normalizes over the trailing dims given by normalized_shape.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LayerNorm"; }

  Shape normalized_shape;
  double eps;
  Tensor weight, bias;  // ones / zeros over normalized_shape; undefined without affine
};

}  // namespace terra::nn
