// Activation layers: parameter-free wrappers over the elementwise and softmax ops.
#pragma once
#include <cstdint>
#include <string>

#include "terra/nn/module.h"

namespace terra::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "ReLU"; }
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope(negative_slope) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LeakyReLU"; }
  double negative_slope;
};

// approximate: "none" (erf form) or "tanh", as torch.nn.GELU.
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "GELU"; }
  std::string approximate;
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Tanh"; }
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Sigmoid"; }
};

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Softmax"; }
  int64_t dim;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LogSoftmax"; }
  int64_t dim;
};

}  // namespace terra::nn
