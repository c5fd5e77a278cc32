// Linear: y = x @ weight^T + bias, weight [out, in], bias [out] (torch.nn.Linear).
#pragma once
#include <cstdint>

#include "terra/nn/module.h"

namespace terra::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Linear"; }
  // Weight bound U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform_ with a = sqrt(5)), bias the same.
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight;  // handles to the registered parameters (update them in place)
  Tensor bias;    // undefined when constructed with bias = false
};

// Identity: returns its input (placeholder layer).
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string name() const override { return "Identity"; }
};

// Flatten: flattens dims start..end (default: all but the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim, end_dim); }
  std::string name() const override { return "Flatten"; }
  int64_t start_dim, end_dim;
};

}  // namespace terra::nn
