// Pooling and upsampling layers over NCHW input (parameter-free wrappers over the pool ops).
#pragma once
#include <cstdint>

#include "terra/nn/module.h"
#include "terra/ops/pool.h"

namespace terra::nn {

// stride 0 means stride = kernel_size (torch's default).
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0)
      : kernel_size(kernel_size), stride(stride == 0 ? kernel_size : stride), padding(padding) {}
  Tensor forward(const Tensor& x) override { return terra::max_pool2d(x, kernel_size, stride, padding); }
  std::string name() const override { return "MaxPool2d"; }
  int64_t kernel_size, stride, padding;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0)
      : kernel_size(kernel_size), stride(stride == 0 ? kernel_size : stride), padding(padding) {}
  Tensor forward(const Tensor& x) override { return terra::avg_pool2d(x, kernel_size, stride, padding); }
  std::string name() const override { return "AvgPool2d"; }
  int64_t kernel_size, stride, padding;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(int64_t output_size) : output_h(output_size), output_w(output_size) {}
  AdaptiveAvgPool2d(int64_t output_h, int64_t output_w) : output_h(output_h), output_w(output_w) {}
  Tensor forward(const Tensor& x) override { return terra::adaptive_avg_pool2d(x, {output_h, output_w}); }
  std::string name() const override { return "AdaptiveAvgPool2d"; }
  int64_t output_h, output_w;
};

// Nearest-neighbour upsampling by a scale factor.
class Upsample : public Module {
 public:
  explicit Upsample(double scale_factor) : scale_factor(scale_factor) {}
  Tensor forward(const Tensor& x) override { return terra::upsample_nearest2d(x, scale_factor); }
  std::string name() const override { return "Upsample"; }
  double scale_factor;
};

}  // namespace terra::nn
