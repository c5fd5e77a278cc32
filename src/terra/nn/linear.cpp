#include "terra/nn/linear.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/autograd/grad_mode.h"
#include "terra/nn/init.h"
#include "terra/ops/creation.h"
#include "terra/ops/linear.h"

namespace terra::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  if (in <= 0 || out <= 0)
    throw std::invalid_argument("[nn::Linear] in_features and out_features must be positive, got " +
                                std::to_string(in) + " and " + std::to_string(out));
  weight = register_parameter("weight", empty({out, in}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = 1.0 / std::sqrt(double(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) { return terra::linear(x, weight, bias); }

}  // namespace terra::nn
