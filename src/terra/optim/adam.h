// Adam and AdamW (torch.optim.Adam / AdamW update rules, amsgrad = false).
#pragma once
#include <utility>
#include <vector>

#include "terra/optim/optimizer.h"

namespace terra::optim {

class Adam : public Optimizer {
 public:
  // weight_decay adds weight_decay * p to the gradient (L2), as torch.optim.Adam.
  Adam(std::vector<Tensor> params, double lr = 1e-3, std::pair<double, double> betas = {0.9, 0.999},
       double eps = 1e-8, double weight_decay = 0.0);
  // m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  // p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
  void step() override;
  std::vector<Tensor> state() const override;
  const std::vector<Tensor>& exp_avg() const { return exp_avg_; }
  const std::vector<Tensor>& exp_avg_sq() const { return exp_avg_sq_; }

  double beta1, beta2, eps, weight_decay;

 protected:
  Adam(std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps, double weight_decay,
       bool decoupled, const char* who);

 private:
  bool decoupled_;  // AdamW: decay the weights directly instead of adding to the gradient
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

// Decoupled weight decay: p *= 1 - lr * weight_decay before the Adam update.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, std::pair<double, double> betas = {0.9, 0.999},
        double eps = 1e-8, double weight_decay = 1e-2)
      : Adam(std::move(params), lr, betas, eps, weight_decay, true, "AdamW") {}
};

}  // namespace terra::optim
