// Dropout: zeroes each element with probability p and scales the rest by 1/(1-p) in training mode;
// the identity in eval mode.
#pragma once
#include <stdexcept>
#include <string>

#include "terra/nn/module.h"
#include "terra/ops/random_ops.h"

namespace terra::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5) : p(p) {
    if (!(p >= 0.0 && p <= 1.0))
      throw std::invalid_argument("[nn::Dropout] p must be in [0, 1], got " + std::to_string(p));
  }
  Tensor forward(const Tensor& x) override { return terra::dropout(x, p, is_training()); }
  std::string name() const override { return "Dropout"; }
  double p;
};

}  // namespace terra::nn
