// Each layer's forward on tiny inputs against values computed by hand (or by plain loops).
#include <gtest/gtest.h>

#include <cmath>

#include <terra/terra.h>

using namespace terra;

namespace {

void set(const Tensor& t, std::vector<float> v) {
  NoGradGuard ng;
  t.copy_(tensor(std::move(v), t.shape()));
}

void expect_near(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  std::vector<float> got = t.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

}  // namespace

TEST(NnLayers, Linear) {
  nn::Linear lin(2, 3);
  set(lin.weight, {1, 2, 3, 4, 5, 6});
  set(lin.bias, {0.5f, -1, 0});
  Tensor y = lin(tensor({1.f, 1.f, 2.f, -1.f}, {2, 2}));
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  expect_near(y, {3.5, 6, 11, 0.5, 1, 4});
  nn::Linear nb(2, 1, false);
  set(nb.weight, {2, 3});
  expect_near(nb(tensor({1.f, 1.f}, {1, 2})), {5});
  // Extra leading dims pass through.
  EXPECT_EQ(lin(ones({4, 5, 2})).shape(), (Shape{4, 5, 3}));
}

TEST(NnLayers, Conv2dStridePadding) {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f}, {1, 1, 3, 3});
  nn::Conv2d c(1, 1, 2);
  set(c.weight, {1, 2, 3, 4});
  set(c.bias, {0.5f});
  expect_near(c(x), {37.5, 47.5, 67.5, 77.5});
  nn::Conv2d s(1, 1, 2, /*stride=*/2, /*padding=*/1);
  set(s.weight, {1, 2, 3, 4});
  set(s.bias, {0.5f});
  Tensor y = s(x);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  expect_near(y, {4.5, 18.5, 36.5, 77.5});
  expect_near(nn::functional::conv2d(x, c.weight, c.bias), {37.5, 47.5, 67.5, 77.5});
}

TEST(NnLayers, ConvTranspose2d) {
  nn::ConvTranspose2d ct(1, 1, 2);
  set(ct.weight, {1, 1, 1, 1});
  set(ct.bias, {0});
  Tensor y = ct(tensor({1.f, 2.f, 3.f, 4.f}, {1, 1, 2, 2}));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  expect_near(y, {1, 3, 2, 4, 10, 6, 3, 7, 4});
  nn::ConvTranspose2d up(3, 2, 4, 2, 1);
  EXPECT_EQ(up.weight.shape(), (Shape{3, 2, 4, 4}));
  EXPECT_EQ(up(zeros({1, 3, 5, 5})).shape(), (Shape{1, 2, 10, 10}));
}

TEST(NnLayers, Activations) {
  Tensor x = tensor({-1.f, 0.f, 2.f}, {3});
  expect_near(nn::ReLU()(x), {0, 0, 2});
  expect_near(nn::Tanh()(x), {std::tanh(-1.0), 0, std::tanh(2.0)});
  expect_near(nn::Sigmoid()(x), {1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-2.0))});
  auto gelu = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  expect_near(nn::GELU()(x), {gelu(-1), 0, gelu(2)});
  auto gelu_t = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  expect_near(nn::GELU("tanh")(x), {gelu_t(-1), 0, gelu_t(2)});
  EXPECT_THROW(nn::GELU("fast"), std::invalid_argument);
  double z = std::exp(-1.0) + 1 + std::exp(2.0);
  expect_near(nn::Softmax(0)(x), {std::exp(-1.0) / z, 1 / z, std::exp(2.0) / z});
  expect_near(nn::LogSoftmax(0)(x), {-1 - std::log(z), -std::log(z), 2 - std::log(z)});
}

TEST(NnLayers, DropoutTrainVersusEval) {
  manual_seed(0);
  nn::Dropout d(0.5);
  Tensor x = ones({2000});
  std::vector<float> y = d(x).to_vector<float>();
  int zeros_n = 0;
  for (float v : y) {
    EXPECT_TRUE(v == 0.f || v == 2.f) << v;
    zeros_n += v == 0.f;
  }
  EXPECT_NEAR(zeros_n / 2000.0, 0.5, 0.05);
  d.eval();
  EXPECT_EQ(d(x).to_vector<float>(), x.to_vector<float>());
  d.train();
  EXPECT_NE(d(x).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(nn::Dropout(0.0)(x).to_vector<float>(), x.to_vector<float>());
}

TEST(NnLayers, BatchNorm2dTrainUpdatesRunningStatsEvalUsesThem) {
  nn::BatchNorm2d bn(2);
  // [N=2, C=2, H=1, W=2]: channel 0 holds 1, 2, 3, 4; channel 1 holds 0, 0, 0, 4.
  Tensor x = tensor({1.f, 2.f, 0.f, 0.f, 3.f, 4.f, 0.f, 4.f}, {2, 2, 1, 2});
  Tensor y = bn(x);
  double s0 = std::sqrt(1.25 + 1e-5), s1 = std::sqrt(3.0 + 1e-5);  // biased batch variances 1.25, 3
  expect_near(y, {-1.5 / s0, -0.5 / s0, -1 / s1, -1 / s1, 0.5 / s0, 1.5 / s0, -1 / s1, 3 / s1}, 1e-4);
  // Running stats: momentum 0.1, unbiased variances 5/3 and 4.
  expect_near(bn.running_mean, {0.25, 0.1});
  expect_near(bn.running_var, {0.9 + 0.1 * 5.0 / 3.0, 0.9 + 0.4});
  bn.eval();
  Tensor e = bn(x);
  double r0 = std::sqrt(0.9 + 0.5 / 3.0 + 1e-5), r1 = std::sqrt(1.3 + 1e-5);
  expect_near(e, {0.75 / r0, 1.75 / r0, -0.1 / r1, -0.1 / r1, 2.75 / r0, 3.75 / r0, -0.1 / r1, 3.9 / r1}, 1e-4);
  expect_near(bn.running_mean, {0.25, 0.1});  // eval leaves them alone
  EXPECT_THROW(bn(zeros({2, 3, 1, 1})), std::invalid_argument);
}

TEST(NnLayers, LayerNorm) {
  nn::LayerNorm ln(3);
  set(ln.weight, {1, 1, 2});
  set(ln.bias, {0, 1, 0});
  Tensor y = ln(tensor({1.f, 2.f, 3.f, 0.f, 0.f, 6.f}, {2, 3}));
  double a = std::sqrt(2.0 / 3.0 + 1e-5), b = std::sqrt(8.0 + 1e-5);
  expect_near(y, {-1 / a, 1, 2 / a, -2 / b, 1 - 2 / b, 8 / b}, 1e-4);
}

TEST(NnLayers, Embedding) {
  nn::Embedding emb(4, 2);
  set(emb.weight, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor y = emb(tensor({3, 0, 1, 1}, {2, 2}));
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  expect_near(y, {6, 7, 0, 1, 2, 3, 2, 3});
}

TEST(NnLayers, PoolingAndLossWrappers) {
  Tensor x = arange(0, 16, 1, DType::Float32).reshape({1, 1, 4, 4});
  expect_near(nn::functional::max_pool2d(x, 2, 2), {5, 7, 13, 15});
  expect_near(nn::functional::max_pool2d(x, 2), {5, 7, 13, 15});
  expect_near(nn::functional::mse_loss(tensor({1.f, 2.f}, {2}), tensor({0.f, 4.f}, {2})), {2.5});
  Tensor logits = tensor({0.f, 0.f, 1.f, 0.f}, {2, 2});
  double ce = 0.5 * (std::log(2.0) + std::log(1 + std::exp(-1.0)));
  expect_near(nn::functional::cross_entropy(logits, tensor({1, 0}, {2})), {ce});
}

namespace {

// Plain-loop multi-head attention over doubles (batch_first), for one batch element.
std::vector<double> mha_reference(const nn::MultiheadAttention& m, const std::vector<float>& q,
                                  const std::vector<float>& kv, int64_t Sq, int64_t Sk, bool causal) {
  const int64_t E = m.embed_dim, H = m.num_heads, D = m.head_dim;
  std::vector<float> W = m.in_proj_weight.to_vector<float>(), bi = m.in_proj_bias.to_vector<float>();
  std::vector<float> Wo = m.out_proj_weight.to_vector<float>(), bo = m.out_proj_bias.to_vector<float>();
  auto proj = [&](const std::vector<float>& x, int64_t S, int64_t part) {
    std::vector<double> out(S * E);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t o = 0; o < E; ++o) {
        double acc = bi[part * E + o];
        for (int64_t i = 0; i < E; ++i) acc += double(x[s * E + i]) * W[(part * E + o) * E + i];
        out[s * E + o] = acc;
      }
    return out;
  };
  auto Q = proj(q, Sq, 0), K = proj(kv, Sk, 1), V = proj(kv, Sk, 2);
  std::vector<double> ctx(Sq * E, 0.0);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < Sq; ++i) {
      std::vector<double> sc(Sk);
      double mx = -1e300;
      for (int64_t j = 0; j < Sk; ++j) {
        double d = 0;
        for (int64_t c = 0; c < D; ++c) d += Q[i * E + h * D + c] * K[j * E + h * D + c];
        sc[j] = (causal && j > i) ? -INFINITY : d / std::sqrt(double(D));
        mx = std::max(mx, sc[j]);
      }
      double z = 0;
      for (double& s : sc) z += (s = std::exp(s - mx));
      for (int64_t j = 0; j < Sk; ++j)
        for (int64_t c = 0; c < D; ++c) ctx[i * E + h * D + c] += sc[j] / z * V[j * E + h * D + c];
    }
  std::vector<double> out(Sq * E);
  for (int64_t s = 0; s < Sq; ++s)
    for (int64_t o = 0; o < E; ++o) {
      double acc = bo[o];
      for (int64_t i = 0; i < E; ++i) acc += ctx[s * E + i] * Wo[o * E + i];
      out[s * E + o] = acc;
    }
  return out;
}

}  // namespace

TEST(NnLayers, MultiheadAttentionMatchesLoopReference) {
  manual_seed(5);
  nn::MultiheadAttention mha(4, 2);
  {
    NoGradGuard ng;  // non-zero biases so they are exercised
    nn::init::uniform_(mha.in_proj_bias, -0.5, 0.5);
    nn::init::uniform_(mha.out_proj_bias, -0.5, 0.5);
  }
  const int64_t B = 2, S = 3, Sk = 5;
  Tensor x = randn({B, S, 4});
  Tensor kv = randn({B, Sk, 4});
  std::vector<float> xv = x.to_vector<float>(), kvv = kv.to_vector<float>();
  auto batch = [](const std::vector<float>& v, int64_t b, int64_t n) {
    return std::vector<float>(v.begin() + b * n, v.begin() + (b + 1) * n);
  };
  Tensor self = mha(x);
  Tensor causal = mha(x, x, x, nn::MultiheadAttention::causal_mask(S));
  Tensor cross = mha(x, kv, kv);
  EXPECT_EQ(self.shape(), (Shape{B, S, 4}));
  EXPECT_EQ(cross.shape(), (Shape{B, S, 4}));
  std::vector<float> sv = self.to_vector<float>(), cv = causal.to_vector<float>(), xv2 = cross.to_vector<float>();
  for (int64_t b = 0; b < B; ++b) {
    auto r_self = mha_reference(mha, batch(xv, b, S * 4), batch(xv, b, S * 4), S, S, false);
    auto r_causal = mha_reference(mha, batch(xv, b, S * 4), batch(xv, b, S * 4), S, S, true);
    auto r_cross = mha_reference(mha, batch(xv, b, S * 4), batch(kvv, b, Sk * 4), S, Sk, false);
    for (int64_t i = 0; i < S * 4; ++i) {
      EXPECT_NEAR(sv[b * S * 4 + i], r_self[i], 1e-5);
      EXPECT_NEAR(cv[b * S * 4 + i], r_causal[i], 1e-5);
      EXPECT_NEAR(xv2[b * S * 4 + i], r_cross[i], 1e-5);
    }
  }
  // A float mask with -inf above the diagonal is the same as the bool causal mask.
  Tensor fmask = where(nn::MultiheadAttention::causal_mask(S), -INFINITY, zeros({S, S}));
  EXPECT_EQ(mha(x, x, x, fmask).to_vector<float>(), cv);
  // Causality: changing the last token does not change the earlier outputs.
  Tensor x2 = x.clone();
  x2.select(1, S - 1).fill_(3.0);
  std::vector<float> c2 = mha(x2, x2, x2, nn::MultiheadAttention::causal_mask(S)).to_vector<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < (S - 1) * 4; ++i) EXPECT_FLOAT_EQ(c2[b * S * 4 + i], cv[b * S * 4 + i]);
  EXPECT_THROW(mha(x, x, x, ones({2, 2})), std::invalid_argument);
  EXPECT_THROW(mha(ones({1, 3, 5})), std::invalid_argument);
}

TEST(NnLayers, MultiheadAttentionKeyPaddingAndGradients) {
  manual_seed(6);
  nn::MultiheadAttention mha(4, 1);
  Tensor x = randn({1, 3, 4});
  // Padding out key 2 equals attending over the first two keys only.
  Tensor kpm = tensor_bool({false, false, true}, {1, 3});
  Tensor kv2 = x.slice(1, 0, 2).contiguous();
  std::vector<float> a = mha(x, x, x, {}, kpm).to_vector<float>();
  std::vector<float> b = mha(x, kv2, kv2).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
  mha(x, x, x, nn::MultiheadAttention::causal_mask(3)).sum().backward();
  for (const Tensor& p : mha.parameters()) EXPECT_TRUE(p.grad().defined());
}

TEST(NnLayers, PoolingLayersLeakyReluBatchNorm1d) {
  Tensor x = arange(0, 16, 1, DType::Float32).reshape({1, 1, 4, 4});
  expect_near(nn::MaxPool2d(2)(x), {5, 7, 13, 15});
  expect_near(nn::AvgPool2d(2)(x), {2.5, 4.5, 10.5, 12.5});
  expect_near(nn::AdaptiveAvgPool2d(1)(x), {7.5});
  Tensor up = nn::Upsample(2)(tensor({1.f, 2.f, 3.f, 4.f}, {1, 1, 2, 2}));
  expect_near(up, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  expect_near(nn::LeakyReLU(0.1)(tensor({-2.f, 3.f}, {2})), {-0.2, 3});
  nn::BatchNorm1d bn(2);
  Tensor y = bn(tensor({1.f, 0.f, 3.f, 4.f}, {2, 2}));  // channel 0: 1, 3; channel 1: 0, 4
  double s0 = std::sqrt(1.0 + 1e-5), s1 = std::sqrt(4.0 + 1e-5);
  expect_near(y, {-1 / s0, -2 / s1, 1 / s0, 2 / s1}, 1e-4);
  expect_near(bn.running_mean, {0.2, 0.2});
  expect_near(bn.running_var, {0.9 + 0.2, 0.9 + 0.8});
  EXPECT_THROW(bn(zeros({2, 2, 2, 2})), std::invalid_argument);
}
