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

}  // namespace
