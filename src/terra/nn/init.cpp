#include "terra/nn/init.h"

#include <cmath>
#include <stdexcept>

#include "terra/autograd/grad_mode.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/random_ops.h"

namespace terra::nn::init {

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  if (t.dim() < 2)
    throw std::invalid_argument("[nn::init] fan in and fan out need a tensor with at least 2 dims, got " +
                                shape_str(t.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.shape()[d];
  return {t.shape()[1] * receptive, t.shape()[0] * receptive};
}

double calculate_gain(const std::string& nl, double param) {
  if (nl == "linear" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" || nl == "sigmoid") return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  throw std::invalid_argument("[nn::init::calculate_gain] unsupported nonlinearity '" + nl + "'");
}

void uniform_(const Tensor& t, double low, double high) {
  NoGradGuard ng;
  t.copy_(rand(t.shape(), t.dtype()) * (high - low) + low);
}

void normal_(const Tensor& t, double mean, double std) {
  NoGradGuard ng;
  t.copy_(randn(t.shape(), t.dtype()) * std + mean);
}

void constant_(const Tensor& t, double value) {
  NoGradGuard ng;
  t.fill_(value);
}
void zeros_(const Tensor& t) { constant_(t, 0.0); }
void ones_(const Tensor& t) { constant_(t, 1.0); }

namespace {
double kaiming_std(const Tensor& t, double a, const std::string& mode, const std::string& nl) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  int64_t fan;
  if (mode == "fan_in") fan = fan_in;
  else if (mode == "fan_out") fan = fan_out;
  else throw std::invalid_argument("[nn::init::kaiming] mode must be fan_in or fan_out, got '" + mode + "'");
  if (fan == 0) throw std::invalid_argument("[nn::init::kaiming] zero fan for shape " + shape_str(t.shape()));
  return calculate_gain(nl, a) / std::sqrt(double(fan));
}
}  // namespace

void kaiming_uniform_(const Tensor& t, double a, const std::string& mode, const std::string& nl) {
  double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl);
  uniform_(t, -bound, bound);
}

void kaiming_normal_(const Tensor& t, double a, const std::string& mode, const std::string& nl) {
  normal_(t, 0.0, kaiming_std(t, a, mode, nl));
}

void xavier_uniform_(const Tensor& t, double gain) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  double bound = gain * std::sqrt(6.0 / double(fan_in + fan_out));
  uniform_(t, -bound, bound);
}

void xavier_normal_(const Tensor& t, double gain) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  normal_(t, 0.0, gain * std::sqrt(2.0 / double(fan_in + fan_out)));
}

}  // namespace terra::nn::init
