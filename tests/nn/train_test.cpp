// End to end: a tiny MLP learns XOR-like generated data with each optimizer.
#include <gtest/gtest.h>

#include <terra/terra.h>

using namespace terra;

namespace {

// Points in [-1, 1]^2, label 1 where x * y > 0 (the XOR pattern of the quadrants).
std::pair<Tensor, Tensor> xor_data(int64_t n) {
  Tensor x = rand({n, 2}) * 2.0 - 1.0;
  std::vector<float> v = x.to_vector<float>();
  std::vector<int64_t> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = v[2 * i] * v[2 * i + 1] > 0 ? 1 : 0;
  return {x, tensor(y, {n})};
}

struct Result {
  float first_loss, last_loss, accuracy;
};

Result train(optim::Optimizer& opt, nn::Module& model, const Tensor& x, const Tensor& y, int steps) {
  Result r{};
  for (int s = 0; s < steps; ++s) {
    Tensor loss = nn::functional::cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (s == 0) r.first_loss = loss.item<float>();
    r.last_loss = loss.item<float>();
  }
  model.eval();
  std::vector<int64_t> pred = argmax(model(x), 1).to_vector<int64_t>(), want = y.to_vector<int64_t>();
  int64_t ok = 0;
  for (size_t i = 0; i < pred.size(); ++i) ok += pred[i] == want[i];
  r.accuracy = float(ok) / float(pred.size());
  return r;
}

}  // namespace

TEST(NnTrain, MlpLearnsXorWithAdam) {
  manual_seed(0);
  auto [x, y] = xor_data(256);
  nn::Sequential model(nn::Linear(2, 32), nn::ReLU(), nn::Linear(32, 2));
  optim::Adam opt(model.parameters(), 0.03);
  Result r = train(opt, model, x, y, 300);
  // Starts near log(2) = 0.69; must fall at least 5x.
  EXPECT_GT(r.first_loss, 0.5f);
  EXPECT_LT(r.last_loss * 5, r.first_loss);
  EXPECT_GT(r.accuracy, 0.93f);
}

TEST(NnTrain, MlpLearnsXorWithSgdMomentum) {
  manual_seed(1);
  auto [x, y] = xor_data(256);
  nn::Sequential model(nn::Linear(2, 32), nn::Tanh(), nn::Linear(32, 2));
  optim::SGD opt(model.parameters(), 0.2, 0.9);
  Result r = train(opt, model, x, y, 300);
  EXPECT_LT(r.last_loss * 4, r.first_loss);
  EXPECT_GT(r.accuracy, 0.9f);
}
