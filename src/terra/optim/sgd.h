// Stochastic gradient descent with momentum, dampening, weight decay and Nesterov momentum
// (torch.optim.SGD's update rule).
#pragma once
#include <vector>

#include "terra/optim/optimizer.h"

namespace terra::optim {

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0.0, double dampening = 0.0,
      double weight_decay = 0.0, bool nesterov = false);
  // d = g + weight_decay * p; buf = momentum * buf + (1 - dampening) * d (buf = d on the first
  // step); d = nesterov ? d + momentum * buf : buf; p -= lr * d.
  void step() override;
  std::vector<Tensor> state() const override;

  // momentum and dampening decide which state exists (buffers, step counts): fixed at construction.
  const double momentum, dampening;
  double weight_decay;
  bool nesterov;

 private:
  std::vector<Tensor> momentum_buffers_;  // one per parameter when momentum != 0
};

}  // namespace terra::optim
