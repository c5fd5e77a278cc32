// The co-execution hard cases (Terra Fig. 1 and 3, DESIGN.md §4/§6): every program runs in
// eager, lazy and co-execution and must observe bit-identical values.
#include <gtest/gtest.h>

#include <cmath>
#include <coroutine>
#include <optional>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

using Observe = std::function<void(const Tensor&)>;

void expect_all_modes_equal(const std::function<void(Engine&, const Observe&)>& program, Observed* co_out = nullptr) {
  Observed eager = run_in_mode(Mode::Eager, program);
  Observed lazy = run_in_mode(Mode::Lazy, program);
  Observed co = run_in_mode(Mode::CoExecution, program);
  expect_same(eager, lazy, "lazy");
  expect_same(eager, co, "coexec");
  if (co_out) *co_out = co;
}

struct Model {
  Tensor w1, b1, w2;
  Model() {
    NoGradGuard g;
    w1 = randn({6, 8}) * 0.3;
    b1 = zeros({8});
    w2 = randn({8, 3}) * 0.3;
    for (Tensor* t : {&w1, &b1, &w2}) t->requires_grad_();
  }
  Tensor operator()(const Tensor& x, double p = 0.0) const {
    Tensor h = relu(matmul(x, w1) + b1);
    if (p > 0) h = dropout(h, p, true);
    return matmul(h, w2);
  }
  void sgd(double lr) {
    NoGradGuard g;
    for (Tensor* t : {&w1, &b1, &w2}) {
      t->sub_(t->grad() * lr);
      t->set_grad({});
    }
  }
};

Tensor batch(int i) {
  std::vector<float> v(4 * 6);
  for (size_t k = 0; k < v.size(); ++k) v[k] = float(int((k * 7 + size_t(i) * 13) % 11) - 5) / 5.0f;
  return tensor(v, {4, 6});
}
Tensor labels(int i) { return tensor(std::vector<int64_t>{i % 3, (i + 1) % 3, (i + 2) % 3, i % 2}, {4}); }

}  // namespace

// Fig. 1a: a third-party library call on a fetched value decides what the host does next.
TEST(CoExecPrograms, ThirdPartyCallOnFetchedValue) {
  Observed co;
  expect_all_modes_equal(
      [](Engine& e, const Observe& obs) {
        Model m;
        double logged = 0;
        for (int i = 0; i < 10; ++i) {
          auto step = e.step();
          Tensor loss = cross_entropy(m(batch(i)), labels(i));
          loss.backward();
          m.sgd(0.1);
          float l = loss.item<float>();
          if (l > 1.0f) logged += std::log(double(l));  // "third-party" host code
          obs(loss);
        }
        obs(tensor_f64({logged}, {1}));
        obs(m.w2);
      },
      &co);
  EXPECT_EQ(co.stats.fallbacks, 0);
  EXPECT_GT(co.stats.steps - co.stats.traces, 3);  // most steps co-executed
}

// Fig. 1b: the training loop is driven by a generator (a C++20 coroutine).
namespace {
struct Gen {
  struct promise_type {
    int value = 0;
    Gen get_return_object() { return Gen{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    std::suspend_always yield_value(int v) {
      value = v;
      return {};
    }
    void return_void() {}
    void unhandled_exception() { throw; }
  };
  std::coroutine_handle<promise_type> h;
  explicit Gen(std::coroutine_handle<promise_type> c) : h(c) {}
  Gen(Gen&& o) noexcept : h(o.h) { o.h = {}; }
  ~Gen() {
    if (h) h.destroy();
  }
  std::optional<int> next() {
    h.resume();
    if (h.done()) return std::nullopt;
    return h.promise().value;
  }
};
Gen batches(int n) {
  for (int i = 0; i < n; ++i) co_yield i * 3 % 7;
}
}  // namespace

TEST(CoExecPrograms, GeneratorDrivenLoop) {
  expect_all_modes_equal([](Engine& e, const Observe& obs) {
    Model m;
    Gen g = batches(9);
    while (auto i = g.next()) {
      auto step = e.step();
      Tensor loss = cross_entropy(m(batch(*i)), labels(*i));
      loss.backward();
      m.sgd(0.05);
      obs(loss);
    }
  });
}

// Fig. 1c: object mutation changes an op attribute (dropout p) at step N: a fallback, invisible.
TEST(CoExecPrograms, ObjectMutationChangesDropout) {
  Observed co;
  expect_all_modes_equal(
      [](Engine& e, const Observe& obs) {
        struct Layer {
          double p = 0.1;
        } layer;
        Model m;
        for (int i = 0; i < 12; ++i) {
          auto step = e.step();
          if (i == 7) layer.p = 0.3;
          Tensor loss = cross_entropy(m(batch(i), layer.p), labels(i));
          loss.backward();
          m.sgd(0.1);
          obs(loss);
        }
        obs(m.w1);
      },
      &co);
  EXPECT_GE(co.stats.fallbacks, 1);
}

// Fig. 3: a branch on a fetched value (two paths merging back) and a loop with varying trips.
TEST(CoExecPrograms, BranchAndLoopMerging) {
  Observed co;
  expect_all_modes_equal(
      [](Engine& e, const Observe& obs) {
        Tensor w = full({3, 3}, 0.5);
        for (int i = 0; i < 16; ++i) {
          auto step = e.step();
          Tensor x = tensor({float(i % 3), 1.f, -1.f}, {1, 3});
          Tensor x1 = matmul(x, w);
          Tensor x2;
          if (x1.sum().item<float>() > 0.5f)
            x2 = tanh(x1);  // true path
          else
            x2 = sigmoid(x1) * 2.0;  // false path
          Tensor x3 = x2 + 1.0;  // merge point
          for (int k = 0; k < 1 + i % 3; ++k) x3 = x3 * 0.5 + x1;  // loop, 1..3 trips
          obs(x3);
        }
      },
      &co);
}

// Nested loops with varying trip counts, recursion and an early return inside a step.
namespace {
Tensor recurse(const Tensor& x, int depth) {
  if (depth == 0) return x;
  return recurse(tanh(x) * 0.9 + 0.1, depth - 1);
}
Tensor body(const Tensor& x, int i, bool& stopped) {
  Tensor y = x;
  for (int a = 0; a < 1 + i % 2; ++a)
    for (int b = 0; b < 1 + (i + a) % 3; ++b) y = y * 0.8 + sigmoid(y);
  y = recurse(y, 1 + i % 3);
  if (i % 4 == 3) {
    stopped = true;
    return y;  // early return skips the rest
  }
  return exp(-y) + y;
}
}  // namespace

TEST(CoExecPrograms, NestedLoopsRecursionEarlyReturn) {
  expect_all_modes_equal([](Engine& e, const Observe& obs) {
    for (int i = 0; i < 20; ++i) {
      auto step = e.step();
      bool stopped = false;
      Tensor y = body(tensor({0.1f * float(i), -0.2f, 0.3f}, {3}), i, stopped);
      obs(y);
    }
  });
}

// Exceptions thrown and caught inside a step; an exception escaping a step leaves variables at
// exactly the eager state and the engine usable.
TEST(CoExecPrograms, ExceptionsInsideAndEscapingSteps) {
  expect_all_modes_equal([](Engine& e, const Observe& obs) {
    Model m;
    for (int i = 0; i < 12; ++i) {
      try {
        auto step = e.step();
        Tensor loss = cross_entropy(m(batch(i)), labels(i));
        try {
          if (i % 3 == 1) throw std::runtime_error("caught inside");
          loss = loss * 1.0;
        } catch (const std::runtime_error&) {
          loss = loss * 2.0;
        }
        loss.backward();
        m.sgd(0.1);
        if (i == 8) throw std::logic_error("escapes the step");
        obs(loss);
      } catch (const std::logic_error&) {
        obs(m.w1);  // the update of step 8 happened before the throw, as in eager
      }
    }
    obs(m.w2);
  });
}

// A tensor kept on an object across steps (RNN state), a first-time fetch, random ops across a
// fallback.
TEST(CoExecPrograms, StateAcrossStepsFirstFetchAndRandom) {
  Observed co;
  expect_all_modes_equal(
      [](Engine& e, const Observe& obs) {
        struct Rnn {
          Tensor h = zeros({1, 4});
          Tensor w = full({4, 4}, 0.1);
        } rnn;
        for (int i = 0; i < 14; ++i) {
          auto step = e.step();
          Tensor x = randn({1, 4});
          rnn.h = tanh(matmul(rnn.h, rnn.w) + x);
          Tensor noise = rand({2});
          if (i == 9) obs(noise);  // first-time fetch of a value never read before
          if (i >= 11) obs(dropout(rnn.h, 0.5, true));  // new path with random ops
          obs(rnn.h);
        }
      },
      &co);
  EXPECT_GE(co.stats.fallbacks, 2);
}

// A shape error raised while the program runs as a skeleton surfaces at the call site with the
// eager message, and the engine stays usable.
TEST(CoExecPrograms, ShapeErrorInSkeletonAtCallSite) {
  for (Mode mode : {Mode::Eager, Mode::Lazy, Mode::CoExecution}) {
    manual_seed(0);
    Engine e(mode);
    Tensor w = full({3, 2}, 0.5);
    std::string msg;
    for (int i = 0; i < 8; ++i) {
      auto step = e.step();
      Tensor x = tensor({1.f, 2.f, 3.f}, {1, 3});
      Tensor y = matmul(x, w);
      if (i == 6) {
        try {
          matmul(y, w);  // [1,2] @ [3,2]
        } catch (const std::invalid_argument& ex) {
          msg = ex.what();
        }
      }
      EXPECT_FLOAT_EQ(y.sum().item<float>(), 6.0f) << mode_name(mode);
    }
    EXPECT_EQ(msg, "[matmul] shapes [1, 2] and [3, 2] cannot be multiplied (2 != 3)") << mode_name(mode);
    if (mode == Mode::CoExecution) EXPECT_GT(e.stats().steps - e.stats().traces, 2);
  }
}
