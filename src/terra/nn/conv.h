// 2-D convolutions over NCHW input (torch.nn.Conv2d / ConvTranspose2d), square kernels.
#pragma once
#include <cstdint>

#include "terra/nn/module.h"

namespace terra::nn {

// weight [out, in/groups, k, k], bias [out].
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0,
         int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Conv2d"; }
  // kaiming_uniform_(a = sqrt(5)) weight, bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as torch.
  void reset_parameters();

  int64_t in_channels, out_channels, kernel_size, stride, padding, dilation, groups;
  Tensor weight, bias;  // bias undefined when constructed with bias = false
};

// weight [in, out/groups, k, k], bias [out]. Output size:
// (H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
                  int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, bool bias = true,
                  int64_t dilation = 1);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "ConvTranspose2d"; }
  void reset_parameters();

  int64_t in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, dilation;
  Tensor weight, bias;
};

}  // namespace terra::nn
