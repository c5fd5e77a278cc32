#include <gtest/gtest.h>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

// A tiny regression model trained with hand-written SGD: forward, backward, in-place update.
void train_linear(Engine& engine, const std::function<void(const Tensor&)>& observe) {
  Tensor w = zeros({4, 1}, DType::Float32);
  w.requires_grad_();
  Tensor b = zeros({1}, DType::Float32);
  b.requires_grad_();
  std::vector<float> xs(8 * 4), ys(8);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) xs[size_t(i * 4 + j)] = float((i * 7 + j * 3) % 5) / 5.0f;
    ys[size_t(i)] = xs[size_t(i * 4)] * 2 - xs[size_t(i * 4 + 1)] + 0.5f;
  }
  for (int it = 0; it < 12; ++it) {
    auto step = engine.step();
    Tensor x = tensor(xs, {8, 4});
    Tensor y = tensor(ys, {8, 1});
    Tensor pred = matmul(x, w) + b;
    Tensor diff = pred - y;
    Tensor loss = (diff * diff).mean();
    loss.backward();
    {
      NoGradGuard ng;
      w.sub_(w.grad() * 0.1);
      b.sub_(b.grad() * 0.1);
      w.set_grad({});
      b.set_grad({});
    }
    observe(loss);
  }
  observe(w);
  observe(b);
}

}  // namespace

TEST(Engine, LinearRegressionSameInAllModes) {
  Observed eager = run_in_mode(Mode::Eager, train_linear);
  Observed lazy = run_in_mode(Mode::Lazy, train_linear);
  Observed co = run_in_mode(Mode::CoExecution, train_linear);
  expect_same(eager, lazy, "lazy");
  expect_same(eager, co, "coexec");
  EXPECT_LT(eager.values[11][0], eager.values[0][0]);  // it learns
  EXPECT_EQ(co.stats.steps, 12);
  EXPECT_GE(co.stats.traces, 1);  // co-execution starts after the first trace
  EXPECT_LE(co.stats.traces, 4);
  EXPECT_EQ(co.stats.fallbacks, 0);
  EXPECT_GE(co.stats.graph_generations, 1);
  EXPECT_GT(lazy.stats.lazy_cache_hits, 0);
}
