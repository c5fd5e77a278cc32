// Optimizers on a tiny quadratic f(p) = sum(c * (p - t)^2), checked against hand-written
// reference loops of torch's update rules and (once) against torch 1.13 itself.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include <terra/terra.h>

using namespace terra;

namespace {

const std::vector<double> kP0{1.0, -2.0, 3.0}, kC{1.0, 0.5, 2.0}, kT{0.5, 0.5, -1.0};

std::vector<double> grad_of(const std::vector<double>& p) {
  std::vector<double> g(p.size());
  for (size_t i = 0; i < p.size(); ++i) g[i] = 2 * kC[i] * (p[i] - kT[i]);
  return g;
}

// Runs `steps` optimizer steps in `dtype`; the loss goes through autograd like a real model's.
std::vector<double> run_terra(const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make,
                              int steps, DType dtype = DType::Float32) {
  Tensor p = cast(tensor_f64(kP0, {3}), dtype).detach().requires_grad_();
  Tensor c = cast(tensor_f64(kC, {3}), dtype), t = cast(tensor_f64(kT, {3}), dtype);
  auto opt = make({p});
  for (int s = 0; s < steps; ++s) {
    opt->zero_grad();
    Tensor d = p - t;
    (c * d * d).sum().backward();
    opt->step();
  }
  Tensor out = cast(p.detach(), DType::Float64);
  return out.to_vector<double>();
}

std::vector<double> ref_sgd(double lr, double mom, double damp, double wd, bool nesterov, int steps) {
  std::vector<double> p = kP0, buf(3, 0.0);
  for (int s = 0; s < steps; ++s) {
    std::vector<double> g = grad_of(p);
    for (size_t i = 0; i < 3; ++i) {
      double d = g[i] + wd * p[i];
      if (mom != 0) {
        buf[i] = s == 0 ? d : mom * buf[i] + (1 - damp) * d;
        d = nesterov ? d + mom * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
  }
  return p;
}

std::vector<double> ref_adam(double lr, double b1, double b2, double eps, double wd, bool decoupled, int steps) {
  std::vector<double> p = kP0, m(3, 0.0), v(3, 0.0);
  for (int s = 1; s <= steps; ++s) {
    std::vector<double> g = grad_of(p);
    for (size_t i = 0; i < 3; ++i) {
      if (decoupled) p[i] *= 1 - lr * wd;
      else g[i] += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      double mhat = m[i] / (1 - std::pow(b1, s)), vhat = v[i] / (1 - std::pow(b2, s));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  return p;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

template <class O, class... A>
auto maker(A... a) {
  return [=](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<O>(std::move(ps), a...);
  };
}

}  // namespace

TEST(Optim, SgdPlainMomentumNesterovWeightDecay) {
  expect_near(run_terra(maker<optim::SGD>(0.1), 5), ref_sgd(0.1, 0, 0, 0, false, 5), 1e-5);
  expect_near(run_terra(maker<optim::SGD>(0.1, 0.9), 6), ref_sgd(0.1, 0.9, 0, 0, false, 6), 1e-5);
  expect_near(run_terra(maker<optim::SGD>(0.05, 0.9, 0.3, 0.01), 6), ref_sgd(0.05, 0.9, 0.3, 0.01, false, 6), 1e-5);
  expect_near(run_terra(maker<optim::SGD>(0.1, 0.9, 0.0, 0.01, true), 5), ref_sgd(0.1, 0.9, 0, 0.01, true, 5), 1e-5);
  // float64 matches the reference loop to rounding.
  expect_near(run_terra(maker<optim::SGD>(0.1, 0.9, 0.0, 0.01, true), 5, DType::Float64),
              ref_sgd(0.1, 0.9, 0, 0.01, true, 5), 1e-12);
}

TEST(Optim, AdamAndAdamW) {
  expect_near(run_terra(maker<optim::Adam>(0.1), 5), ref_adam(0.1, 0.9, 0.999, 1e-8, 0, false, 5), 1e-5);
  auto betas = std::make_pair(0.8, 0.99);
  expect_near(run_terra(maker<optim::Adam>(0.1, betas, 1e-8, 0.05), 5), ref_adam(0.1, 0.8, 0.99, 1e-8, 0.05, false, 5),
              1e-5);
  expect_near(run_terra(maker<optim::AdamW>(0.1), 7), ref_adam(0.1, 0.9, 0.999, 1e-8, 1e-2, true, 7), 1e-5);
  expect_near(run_terra(maker<optim::AdamW>(0.1, std::make_pair(0.9, 0.999), 1e-8, 0.1), 5, DType::Float64),
              ref_adam(0.1, 0.9, 0.999, 1e-8, 0.1, true, 5), 1e-12);
}

// Constants printed once by Debian's torch 1.13 (/usr/bin/python3, float64, same quadratic, 5 steps):
// torch.optim.SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), SGD(lr=0.1, momentum=0.9,
// dampening=0.3), Adam(lr=0.1, betas=(0.8, 0.99), weight_decay=0.05), AdamW(lr=0.1, weight_decay=0.1).
TEST(Optim, MatchesTorchOracle) {
  auto f64 = DType::Float64;
  expect_near(run_terra(maker<optim::SGD>(0.1, 0.9, 0.0, 0.01, true), 5, f64),
              {0.28829667932743913, 0.7714775103333381, -1.6503006100826272}, 1e-12);
  expect_near(run_terra(maker<optim::SGD>(0.1, 0.9, 0.3), 5, f64),
              {0.288943104, 0.16561802750000015, -4.340071936000001}, 1e-12);
  expect_near(run_terra(maker<optim::Adam>(0.1, std::make_pair(0.8, 0.99), 1e-8, 0.05), 5, f64),
              {0.5376021729226631, -1.504138910317996, 2.5024176745347315}, 1e-12);
  expect_near(run_terra(maker<optim::AdamW>(0.1, std::make_pair(0.9, 0.999), 1e-8, 0.1), 5, f64),
              {0.49396355854999646, -1.414623840218527, 2.364561103972095}, 1e-12);
}

TEST(Optim, StateTensorsAreCreatedOnceAndUpdatedInPlace) {
  Tensor p = tensor({1.f, 2.f}, {2}).requires_grad_();
  optim::Adam opt({p}, 0.1);
  std::vector<Tensor> before = opt.state();
  ASSERT_EQ(before.size(), 4u);  // step count, the parameter's step count, exp_avg, exp_avg_sq
  for (int s = 0; s < 3; ++s) {
    opt.zero_grad();
    (p * p).sum().backward();
    opt.step();
  }
  std::vector<Tensor> after = opt.state();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(after[i].same(before[i]));
  EXPECT_EQ(opt.step_count(), 3);
  EXPECT_EQ(opt.step_tensor().item<double>(), 3.0);
  EXPECT_FALSE(opt.exp_avg()[0].requires_grad());
  EXPECT_NE(opt.exp_avg()[0].to_vector<float>(), std::vector<float>(2, 0.f));
  EXPECT_TRUE(p.is_leaf());

  optim::SGD sgd({p}, 0.1, 0.9);
  EXPECT_EQ(sgd.state().size(), 2u);  // step count, momentum buffer
}

TEST(Optim, ZeroGradAndMissingGradients) {
  Tensor a = tensor({1.f}, {1}).requires_grad_();
  Tensor b = tensor({5.f}, {1}).requires_grad_();
  optim::SGD opt({a, b}, 0.5, 0.9);
  (a * 3.0).sum().backward();
  opt.step();  // b has no gradient: left alone
  EXPECT_FLOAT_EQ(a.item<float>(), 1.f - 1.5f);
  EXPECT_FLOAT_EQ(b.item<float>(), 5.f);
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  opt.step();  // nothing to do
  EXPECT_FLOAT_EQ(a.item<float>(), -0.5f);
  opt.set_lr(0.25);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.25);
}

TEST(Optim, RejectsBadArguments) {
  Tensor p = ones({2}).requires_grad_();
  EXPECT_THROW(optim::SGD({p}, -1.0), std::invalid_argument);
  EXPECT_THROW(optim::SGD({p}, 0.1, -0.5), std::invalid_argument);
  EXPECT_THROW(optim::SGD({p}, 0.1, 0.0, 0.0, 0.0, true), std::invalid_argument);
  EXPECT_THROW(optim::Adam({p}, 0.1, {1.0, 0.999}), std::invalid_argument);
  EXPECT_THROW(optim::Adam({p * 2.0}, 0.1), std::invalid_argument);  // not a leaf
  EXPECT_THROW(optim::SGD({Tensor()}, 0.1), std::invalid_argument);
  EXPECT_THROW(optim::SGD({tensor({1, 2}, {2})}, 0.1), std::invalid_argument);
}
