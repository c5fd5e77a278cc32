// The co-execution protocol inside loops: a loop's iterations and a loop-carried value's phi need
// no message per iteration (graph::OpNode::phi_predicted, GraphRunner::loop_continues). The runner
// repeats a phi's last choices and takes another iteration once the host validated the position
// after the body; only an exit, or a choice that differs from the last one, is a message. Each
// test checks the values against eager's (a wrong guess on the runner's side would read another
// value) and counts the messages.
#include <gtest/gtest.h>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

using Observe = std::function<void(const Tensor&)>;

// Messages per co-executed step after the graph settled: the last `steps` of the run.
double messages_per_step(Engine& engine, const std::function<void()>& step, int steps) {
  engine.synchronize();
  const int64_t m0 = engine.stats().messages;
  for (int s = 0; s < steps; ++s) step();
  engine.synchronize();
  return double(engine.stats().messages - m0) / steps;
}

// Runs `program` in eager and in co-execution, checks co-execution's values against eager's and
// that it generated a graph; returns co-execution's messages per step (what `program` measured).
using Measured = std::function<void(Engine&, const Observe&, double*)>;
double coexec_messages_like_eager(const Measured& program) {
  double unused = 0, msgs = 0;
  Observed e = run_in_mode(Mode::Eager, [&](Engine& en, const Observe& o) { program(en, o, &unused); });
  Observed c = run_in_mode(Mode::CoExecution, [&](Engine& en, const Observe& o) { program(en, o, &msgs); });
  expect_same(e, c, "coexec");
  EXPECT_GT(c.stats.graph_generations, 0);
  return msgs;
}

TEST(LoopMessages, LoopCarriedValueNeedsNoMessagePerIteration) {
  constexpr int kIters = 64;
  auto program = [](Engine& engine, const Observe& observe, double* per_step) {
    Tensor b = randn({4}), c0 = randn({4});
    auto step = [&] {
      auto s = engine.step();
      Tensor c = c0;
      for (int i = 0; i < kIters; ++i) c = c + b;  // the phi: c0 at the first iteration, c after
      observe(c);
    };
    for (int s = 0; s < 10; ++s) step();
    if (per_step) *per_step = messages_per_step(engine, step, 10);
  };
  const double coexec_msgs = coexec_messages_like_eager(program);
  // Before: a Validate per iteration (64) plus the step's markers and fetch. Now: the phi's first
  // choice, its change at the second iteration, and the step's own messages.
  EXPECT_LT(coexec_msgs, 10.0);
  std::printf("[loop messages] %d iterations: %.1f messages per step\n", kIters, coexec_msgs);
}

TEST(LoopMessages, VariableTripCountsSendOnlyTheExit) {
  auto program = [](Engine& engine, const Observe& observe, double* per_step) {
    Tensor w = randn({3, 3}), x0 = randn({2, 3});
    int s = 0;
    auto step = [&] {
      auto st = engine.step();
      const int trips = 3 + (s * 5) % 7;  // 3..9, changing every step: a loop with a Loop Cond
      Tensor x = x0;
      for (int i = 0; i < trips; ++i) x = tanh(matmul(x, w)) + x;
      observe(x.sum());
      s++;
    };
    for (int k = 0; k < 24; ++k) step();
    if (per_step) *per_step = messages_per_step(engine, step, 14);
  };
  const double msgs = coexec_messages_like_eager(program);
  // 3..9 iterations of 3 ops; a message per iteration would be 9 or more on average.
  EXPECT_LT(msgs, 9.0);
  std::printf("[loop messages] 3..9 trips: %.1f messages per step\n", msgs);
}

// The phi's choice alternates between two op values every iteration: the host must send each
// change, and the runner must not repeat the previous one.
TEST(LoopMessages, AlternatingChoicesAreSentEveryTime) {
  auto program = [](Engine& engine, const Observe& observe) {
    Tensor a = randn({5}), b = randn({5}), x0 = randn({5});
    for (int s = 0; s < 16; ++s) {
      auto st = engine.step();
      Tensor u = a * 2.0, v = b * 3.0;
      Tensor x = x0;
      for (int i = 0; i < 12; ++i) x = x * 0.5 + (i % 2 ? u : v);
      observe(x);
    }
  };
  Observed e = run_in_mode(Mode::Eager, program);
  Observed c = run_in_mode(Mode::CoExecution, program);
  expect_same(e, c, "coexec");
  EXPECT_GT(c.stats.graph_generations, 0);
}

// A new path in the middle of a loop whose iterations and phis went without messages: the host
// falls back there; every value it holds is the eager one, and later steps co-execute again.
TEST(LoopMessages, FallbackInsideAPredictedLoopKeepsEagerValues) {
  auto program = [](Engine& engine, const Observe& observe) {
    Tensor w = randn({4, 4}) * 0.5, x0 = randn({3, 4});
    std::vector<Tensor> mid;
    for (int s = 0; s < 30; ++s) {
      auto st = engine.step();
      Tensor x = x0;
      for (int i = 0; i < 10; ++i) {
        x = tanh(matmul(x, w)) + x;
        if (s == 20 && i == 6) x = x * 0.25;  // once: a call the graph has never seen
        if (i == 3) mid.push_back(x);         // held past the step, fetched at the end
      }
      observe(x.sum());
    }
    for (const Tensor& m : mid) observe(m);
  };
  Observed e = run_in_mode(Mode::Eager, program);
  Observed c = run_in_mode(Mode::CoExecution, program);
  expect_same(e, c, "coexec");
  EXPECT_GE(c.stats.fallbacks, 1);
}

// A loop over layers: one call site takes another parameter each iteration, so its input is a
// feed, and the loop-carried value a phi. The graph predicts both by run (OpNode::run_predicted):
// the host sends nothing while every call takes what the last trace took there.
TEST(LoopMessages, LoopOverLayersTakesItsParametersWithoutMessages) {
  constexpr int kLayers = 6;
  auto program = [](Engine& engine, const Observe& observe, double* per_step) {
    std::vector<Tensor> w;
    for (int k = 0; k < kLayers; ++k) w.push_back(randn({4, 4}) * 0.5);
    Tensor x0 = randn({3, 4});
    auto step = [&] {
      auto s = engine.step();
      Tensor x = x0;
      for (int k = 0; k < kLayers; ++k) x = tanh(matmul(x, w[size_t(k)])) + x;
      observe(x.sum());
    };
    for (int s = 0; s < 10; ++s) step();
    if (per_step) *per_step = messages_per_step(engine, step, 10);
  };
  const double msgs = coexec_messages_like_eager(program);
  // Before: a Validate for each layer's parameter (6), and one for the phi's change.
  EXPECT_LT(msgs, double(kLayers));
  std::printf("[loop messages] %d layers: %.1f messages per step\n", kLayers, msgs);
}

// Calls that differ from the prediction are sent, and the runner takes what the host sent: the
// layers in another order, another tensor from before the step in one layer's place, a loop
// cut short, and a phi taking another producer.
TEST(LoopMessages, CallsThatDifferFromThePredictionAreSent) {
  auto program = [](Engine& engine, const Observe& observe) {
    std::vector<Tensor> w;
    for (int k = 0; k < 4; ++k) w.push_back(randn({4, 4}) * 0.5);
    Tensor other = randn({4, 4}) * 0.5, x0 = randn({3, 4}), x1 = randn({3, 4});
    for (int s = 0; s < 30; ++s) {
      auto st = engine.step();
      Tensor x = s % 7 == 5 ? x1 * 1.0 : x0 * 1.0;
      for (int k = 0; k < 4; ++k) {
        const int layer = s % 5 == 3 ? 3 - k : k;  // reversed every fifth step
        const Tensor& wk = s % 9 == 4 && k == 2 ? other : w[size_t(layer)];
        x = tanh(matmul(x, wk)) + (s % 6 == 2 && k == 1 ? x0 : x);  // the phi takes the input once
      }
      observe(x.sum());
    }
  };
  Observed e = run_in_mode(Mode::Eager, program);
  Observed c = run_in_mode(Mode::CoExecution, program);
  expect_same(e, c, "coexec");
  EXPECT_GT(c.stats.graph_generations, 0);
}

// A call site whose attributes take another value each run (a symbolic attribute): predicted by
// run as well, and sent when a step's sizes differ.
TEST(LoopMessages, SymbolicAttributesArePredictedByRun) {
  auto program = [](Engine& engine, const Observe& observe, double* per_step) {
    Tensor x0 = randn({24});
    const std::vector<Shape> shapes = {{4, 6}, {6, 4}, {3, 8}, {2, 12}};
    int step_no = 0;
    auto step = [&] {
      auto s = engine.step();
      Tensor acc = x0 * 1.0;
      for (int k = 0; k < 4; ++k) {
        const Shape& sh = shapes[size_t(step_no % 11 == 7 ? 3 - k : k)];  // sizes in another order once in a while
        Tensor r = acc.reshape(sh);
        acc = acc + (r * r.sum()).reshape({24}) * 0.01;
      }
      observe(acc);
      step_no++;
    };
    for (int s = 0; s < 12; ++s) step();
    if (per_step) *per_step = messages_per_step(engine, step, 10);
  };
  const double msgs = coexec_messages_like_eager(program);
  std::printf("[loop messages] reshape to 4 sizes: %.1f messages per step\n", msgs);
  EXPECT_LT(msgs, 8.0);  // before: a Validate for each of the 4 runs as well (10.4)
}

}  // namespace
