// Engines on different threads share the allocator, the oneDNN primitive cache, tensor ids and the
// executor slot (thread_local): two co-executing engines (each with its GraphRunner) and a lazy one
// run at once and must each give the eager values. Under ThreadSanitizer this checks that shared state.
#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "runtime/mode_harness.h"
#include "terra/runtime/coexec.h"

using namespace terra;
using namespace terra::testing;

namespace {

// A small conv net trained with hand-written SGD; deterministic (no random ops), so threads
// interleaving their draws from the global generator cannot change the values.
void train_conv(Engine& engine, const std::function<void(const Tensor&)>& observe) {
  std::vector<float> wv(4 * 2 * 3 * 3), xv(3 * 2 * 6 * 6), yv(3 * 4 * 4 * 4);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = float(int(i * 7 % 11) - 5) / 20.0f;
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i * 5 % 13) - 6) / 6.0f;
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = float(int(i * 3 % 7) - 3) / 4.0f;
  Tensor w = tensor(wv, {4, 2, 3, 3});
  w.requires_grad_();
  Tensor b = zeros({4}, DType::Float32);
  b.requires_grad_();
  for (int it = 0; it < 10; ++it) {
    auto step = engine.step();
    Tensor x = tensor(xv, {3, 2, 6, 6});
    Tensor y = tensor(yv, {3, 4, 4, 4});
    Tensor h = relu(conv2d(x, w, b));
    Tensor diff = h - y;
    Tensor loss = (diff * diff).mean();
    loss.backward();
    {
      NoGradGuard ng;
      w.sub_(w.grad() * 0.2);
      b.sub_(b.grad() * 0.2);
      w.set_grad({});
      b.set_grad({});
    }
    observe(loss);
  }
  observe(w);
  observe(b);
}

}  // namespace

TEST(ConcurrentEngines, CoExecAndLazyOnThreadsMatchEager) {
  Observed eager = run_in_mode(Mode::Eager, train_conv);
  const Mode modes[] = {Mode::CoExecution, Mode::CoExecution, Mode::Lazy};
  Observed got[3];
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) got[t] = run_in_mode(modes[t], train_conv);
    });
  for (auto& th : threads) th.join();
  ASSERT_EQ(eager.values.size(), 12u);
  EXPECT_LT(eager.values[9][0], eager.values[0][0]);  // it learns
  for (int t = 0; t < 3; ++t) expect_same(eager, got[t], mode_name(modes[t]));
  EXPECT_GT(got[0].stats.steps - got[0].stats.traces, 0);  // co-execution really ran
  EXPECT_GT(got[1].stats.steps - got[1].stats.traces, 0);
}

namespace {

// One SGD step of a tiny regression on `w`; returns the loss.
Tensor regression_step(Tensor& w, float scale) {
  Tensor x = full({4, 3}, scale);
  Tensor d = matmul(x, w) - 1.0f;
  Tensor loss = (d * d).mean();
  loss.backward();
  NoGradGuard ng;
  w.sub_(w.grad() * 0.1);
  w.set_grad({});
  return loss.detach();
}

Tensor fresh_weight() {
  Tensor w = full({3, 2}, 0.25f);
  w.requires_grad_();
  return w;
}

// Losses of 12 steps of two models, each step of `a` followed by one of `b`; with `nested`, b's
// step runs inside a's, and a's last op comes after b's step ended.
std::vector<float> two_models(Engine& a, Engine& b, bool nested) {
  Tensor wa = fresh_weight(), wb = fresh_weight();
  std::vector<Tensor> losses;
  for (int s = 0; s < 12; ++s) {
    std::optional<Step> sa(a.step());
    Tensor la = regression_step(wa, 0.5f);
    if (!nested) sa.reset();
    {
      auto sb = b.step();
      losses.push_back(regression_step(wb, 0.25f));
    }
    losses.push_back(la * 2.0f);  // in a's step when nested
    sa.reset();
  }
  std::vector<float> out;
  for (const Tensor& l : losses) out.push_back(l.item<float>());
  for (const Tensor& w : {wa, wb})
    for (float v : w.to_vector<float>()) out.push_back(v);
  return out;
}

}  // namespace

// Two co-executing engines on one thread: the engine made first used to run every step eagerly,
// because the idle executor of the engine made last sat above it on the thread's stack.
TEST(ConcurrentEngines, TwoCoExecEnginesOnOneThreadBothCoExecute) {
  for (bool nested : {false, true}) {
    std::vector<float> eager;
    {
      Engine a(Mode::Eager), b(Mode::Eager);
      eager = two_models(a, b, nested);
    }
    Engine a(Mode::CoExecution), b(Mode::CoExecution);
    EXPECT_EQ(two_models(a, b, nested), eager) << "nested " << nested;
    for (Engine* e : {&a, &b}) {
      const Stats s = e->stats();
      EXPECT_EQ(s.steps, 12) << "nested " << nested;
      EXPECT_LE(s.traces, 4) << "nested " << nested;  // it converged and co-executed the rest
      EXPECT_GT(s.runner_busy_s, 0.0) << "nested " << nested;
      // Its own ops reached its graph (a regression step is ~20 of them), not another engine's.
      EXPECT_GE(e->coexec()->trace_graph().num_nodes(), 10u) << "nested " << nested;
    }
  }
}

// A value one engine's step made, read in another engine's step: the reader must see a value from
// outside its step. Step uids were counted per session, so engine b's step n took a's step-n
// tensors for its own records (the same number) and its graph read the wrong producer: b computed
// u + u where the program said t + u.
TEST(ConcurrentEngines, AValueFromAnotherEnginesStepIsNotTakenForOwnRecord) {
  auto program = [](Mode m) {
    Engine a(m), b(m);
    Tensor w = full({2}, 1.0f);
    std::vector<float> out;
    for (int s = 0; s < 8; ++s) {
      Tensor t;
      {
        auto st = a.step();
        t = w * 2.0f;  // a's first op of its step
      }
      auto st = b.step();
      Tensor u = full({2}, 3.0f);
      Tensor y = t + u;
      for (float v : y.to_vector<float>()) out.push_back(v);
    }
    return out;
  };
  std::vector<float> eager = program(Mode::Eager);
  EXPECT_EQ(eager.front(), 5.0f);
  EXPECT_EQ(program(Mode::CoExecution), eager);
  EXPECT_EQ(program(Mode::Lazy), eager);
}
