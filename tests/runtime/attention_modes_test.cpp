// A small transformer block built on nn::MultiheadAttention (the fused attention op: forward and
// backward) trained with Adam in eager, lazy and co-execution: losses and parameters bit-identical.
// Also with attention dropout (the composed path, random masks) and in eval mode (no saved weights).
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

using Observe = std::function<void(const Tensor&)>;

struct Block : nn::Module {
  Block(int64_t e, int64_t h, double dropout) : attn(e, h, dropout), ln1(e), ln2(e), fc1(e, 2 * e), fc2(2 * e, e) {
    register_module("attn", attn);
    register_module("ln1", ln1);
    register_module("ln2", ln2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x, const Tensor& mask, const Tensor& padding) {
    Tensor h = ln1(x);
    Tensor y = x + attn.forward(h, h, h, mask, padding);
    return y + fc2(nn::functional::gelu(fc1(ln2(y))));
  }
  using nn::Module::forward;
  nn::MultiheadAttention attn;
  nn::LayerNorm ln1, ln2;
  nn::Linear fc1, fc2;
};

// Host data of step i: inputs [B, S, E], targets, and a key padding mask hiding the last i % 3 keys.
Tensor inputs(int i, int64_t B, int64_t S, int64_t E) {
  std::vector<float> v(size_t(B * S * E));
  for (size_t k = 0; k < v.size(); ++k) v[k] = float(int((k * 7 + size_t(i) * 13) % 17) - 8) / 8.0f;
  return tensor(v, {B, S, E});
}
Tensor padding(int i, int64_t B, int64_t S) {
  std::vector<bool> m(size_t(B * S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) m[size_t(b * S + s)] = s >= S - (i + b) % 3;
  return tensor_bool(m, {B, S});
}

void train(Engine& e, const Observe& obs, double dropout, bool eval_every_third) {
  const int64_t B = 2, S = 12, E = 16, H = 4;
  Block model(E, H, dropout);
  optim::Adam opt(model.parameters(), 1e-2);
  Tensor causal = nn::MultiheadAttention::causal_mask(S);
  for (int i = 0; i < 8; ++i) {
    auto step = e.step();
    Tensor x = inputs(i, B, S, E), target = inputs(i + 100, B, S, E);
    if (eval_every_third && i % 3 == 2) {
      model.eval();
      NoGradGuard ng;
      obs(model.forward(x, causal, padding(i, B, S)));
      model.train();
      continue;
    }
    Tensor loss = mse_loss(model.forward(x, causal, padding(i, B, S)), target);
    opt.zero_grad();
    loss.backward();
    opt.step();
    obs(loss);
  }
  for (const Tensor& p : model.parameters()) obs(p);
}

void expect_all_modes_equal(const std::function<void(Engine&, const Observe&)>& program) {
  Observed eager = run_in_mode(Mode::Eager, program);
  Observed lazy = run_in_mode(Mode::Lazy, program);
  Observed co = run_in_mode(Mode::CoExecution, program);
  expect_same(eager, lazy, "lazy");
  expect_same(eager, co, "coexec");
  EXPECT_GT(co.stats.steps - co.stats.traces, 2) << "co-execution should run most steps from the graph";
  // The program learns: step 7's loss (a training step in both programs) is below step 0's.
  EXPECT_LT(eager.values[7][0], eager.values[0][0]);
}

}  // namespace

TEST(AttentionModes, TransformerBlockBitIdenticalInEveryMode) {
  expect_all_modes_equal([](Engine& e, const Observe& obs) { train(e, obs, 0.0, false); });
}

TEST(AttentionModes, WithDropoutAndEvalSteps) {
  expect_all_modes_equal([](Engine& e, const Observe& obs) { train(e, obs, 0.1, true); });
}
