#include "terra/nn/conv.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/nn/init.h"
#include "terra/ops/conv.h"

namespace terra::nn {
namespace {

void check_conv_args(const char* layer, int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
                     int64_t dilation, int64_t groups) {
  auto bad = [&](const std::string& what) {
    throw std::invalid_argument(std::string("[nn::") + layer + "] " + what + " (in_channels=" + std::to_string(in) +
                                ", out_channels=" + std::to_string(out) + ", kernel_size=" + std::to_string(k) +
                                ", stride=" + std::to_string(stride) + ", padding=" + std::to_string(padding) +
                                ", dilation=" + std::to_string(dilation) + ", groups=" + std::to_string(groups) + ")");
  };
  if (in <= 0 || out <= 0 || k <= 0) bad("channels and kernel_size must be positive");
  if (stride <= 0 || dilation <= 0 || padding < 0) bad("stride and dilation must be positive, padding non-negative");
  if (groups <= 0 || in % groups != 0 || out % groups != 0) bad("groups must divide in_channels and out_channels");
}

// torch's _ConvNd.reset_parameters: fan_in comes from weight dim 1 times the kernel area.
void reset_conv(const Tensor& weight, const Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(weight);
    double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding, int64_t dilation, int64_t groups,
               bool with_bias)
    : in_channels(in), out_channels(out), kernel_size(k), stride(stride), padding(padding), dilation(dilation),
      groups(groups) {
  check_conv_args("Conv2d", in, out, k, stride, padding, dilation, groups);
  weight = register_parameter("weight", empty({out, in / groups, k, k}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Conv2d::reset_parameters() { reset_conv(weight, bias); }

Tensor Conv2d::forward(const Tensor& x) {
  return terra::conv2d(x, weight, bias, {stride, stride}, {padding, padding}, {dilation, dilation}, groups);
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
                                 int64_t output_padding, int64_t groups, bool with_bias, int64_t dilation)
    : in_channels(in), out_channels(out), kernel_size(k), stride(stride), padding(padding),
      output_padding(output_padding), groups(groups), dilation(dilation) {
  check_conv_args("ConvTranspose2d", in, out, k, stride, padding, dilation, groups);
  if (output_padding < 0 || (output_padding >= stride && output_padding >= dilation))
    throw std::invalid_argument("[nn::ConvTranspose2d] output_padding " + std::to_string(output_padding) +
                                " must be smaller than stride or dilation");
  weight = register_parameter("weight", empty({in, out / groups, k, k}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void ConvTranspose2d::reset_parameters() { reset_conv(weight, bias); }

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return terra::conv_transpose2d(x, weight, bias, {stride, stride}, {padding, padding},
                                 {output_padding, output_padding}, {dilation, dilation}, groups);
}

}  // namespace terra::nn
