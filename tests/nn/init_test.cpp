// Default initializations follow torch: bounds, moments, reproducibility under manual_seed.
#include <gtest/gtest.h>

#include <cmath>

#include <terra/terra.h>

using namespace terra;

namespace {

struct Moments {
  double min, max, mean, var;
};
Moments moments(const Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  Moments m{1e30, -1e30, 0, 0};
  for (float x : v) {
    m.min = std::min(m.min, double(x));
    m.max = std::max(m.max, double(x));
    m.mean += x;
  }
  m.mean /= double(v.size());
  for (float x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= double(v.size());
  return m;
}

// U(-b, b): all values inside, and mean / variance (b^2 / 3) close to the distribution's.
void expect_uniform(const Tensor& t, double bound) {
  Moments m = moments(t);
  double n = double(t.numel());
  EXPECT_GE(m.min, -bound);
  EXPECT_LE(m.max, bound);
  EXPECT_GT(m.max, bound * 0.9);  // the range is actually used
  EXPECT_LT(m.min, -bound * 0.9);
  double sd = bound / std::sqrt(3.0);
  EXPECT_NEAR(m.mean, 0.0, 5 * sd / std::sqrt(n));
  EXPECT_NEAR(m.var, sd * sd, 0.1 * sd * sd);
}

}  // namespace

TEST(NnInit, LinearKaimingUniformAndBias) {
  manual_seed(0);
  nn::Linear lin(64, 200);
  expect_uniform(lin.weight, 1.0 / std::sqrt(64.0));  // kaiming_uniform_(a = sqrt(5)) = U(+-1/sqrt(fan_in))
  Moments b = moments(lin.bias);
  EXPECT_GE(b.min, -1.0 / 8.0);
  EXPECT_LE(b.max, 1.0 / 8.0);
  EXPECT_GT(b.max - b.min, 0.1);
  // Initialization leaves leaves: no history recorded.
  EXPECT_TRUE(lin.weight.is_leaf());
  EXPECT_FALSE(lin.weight.grad().defined());
}

TEST(NnInit, ConvFanInIncludesKernelArea) {
  manual_seed(1);
  nn::Conv2d conv(8, 64, 3);
  expect_uniform(conv.weight, 1.0 / std::sqrt(8.0 * 9.0));
  Moments b = moments(conv.bias);
  EXPECT_LE(std::max(-b.min, b.max), 1.0 / std::sqrt(72.0));
}

TEST(NnInit, EmbeddingStandardNormalAndNormOnesZeros) {
  manual_seed(2);
  nn::Embedding emb(1000, 16);
  Moments m = moments(emb.weight);
  EXPECT_NEAR(m.mean, 0.0, 0.03);
  EXPECT_NEAR(m.var, 1.0, 0.05);
  nn::LayerNorm ln(7);
  EXPECT_EQ(ln.weight.to_vector<float>(), std::vector<float>(7, 1.f));
  EXPECT_EQ(ln.bias.to_vector<float>(), std::vector<float>(7, 0.f));
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(bn.weight.to_vector<float>(), std::vector<float>(3, 1.f));
  EXPECT_EQ(bn.running_mean.to_vector<float>(), std::vector<float>(3, 0.f));
  EXPECT_EQ(bn.running_var.to_vector<float>(), std::vector<float>(3, 1.f));
}

TEST(NnInit, ManualSeedMakesInitReproducible) {
  manual_seed(42);
  nn::Sequential a(nn::Linear(5, 7), nn::Linear(7, 3));
  manual_seed(42);
  nn::Sequential b(nn::Linear(5, 7), nn::Linear(7, 3));
  nn::Sequential c(nn::Linear(5, 7), nn::Linear(7, 3));  // generator moved on: differs
  auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].to_vector<float>(), pb[i].to_vector<float>());
    EXPECT_NE(pa[i].to_vector<float>(), pc[i].to_vector<float>());
  }
}

TEST(NnInit, FansGainsAndXavier) {
  auto [fi, fo] = nn::init::calculate_fan_in_and_fan_out(zeros({6, 4, 3, 3}));
  EXPECT_EQ(fi, 36);
  EXPECT_EQ(fo, 54);
  EXPECT_THROW(nn::init::calculate_fan_in_and_fan_out(zeros({3})), std::invalid_argument);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  manual_seed(3);
  Tensor w = zeros({100, 300});
  nn::init::xavier_uniform_(w);
  expect_uniform(w, std::sqrt(6.0 / 400.0));
  Tensor d = zeros({50, 40}, DType::Float64);
  nn::init::kaiming_normal_(d, 0.0, "fan_in", "relu");
  std::vector<double> v = d.to_vector<double>();
  double var = 0;
  for (double x : v) var += x * x;
  EXPECT_NEAR(var / v.size(), 2.0 / 40.0, 0.1 * 2.0 / 40.0);
}
