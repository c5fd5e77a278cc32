// Value-dependent errors (class index or index out of range, integer division by zero) raised at
// the user's call site with eager's exact message in every mode whenever the values are on the
// host, and never a crash (SIGFPE, std::terminate from a parallel region) where they are not.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include <terra/terra.h>

#include "terra/backend/cpu/parallel.h"

namespace terra {
namespace {

constexpr Mode kModes[] = {Mode::Eager, Mode::Lazy, Mode::CoExecution};
constexpr int kSteps = 8, kBadStep = 5;  // 5 good steps first: co-execution runs the skeleton by then

// One op with a value check inside a small training step: loss = mean(h^2) + mean(op(h, idx)^2),
// h = pre(w) an in-graph value, idx fed from the host every step (bad at kBadStep).
struct ValueCase {
  const char* name;
  Shape wshape;
  std::function<Tensor(int step, bool bad)> index;
  std::function<Tensor(const Tensor& w)> pre;
  std::function<Tensor(const Tensor& h, const Tensor& idx)> op;
  std::string message;  // eager's message for the bad step
};

struct CaseRun {
  std::string call_error;   // what the checked call itself raised
  std::string later_error;  // anything raised elsewhere (a late error: the bug)
  std::vector<float> losses, w;
  int64_t traces_before_bad = -1;
};

CaseRun run_case(const ValueCase& c, Mode m) {
  manual_seed(0);
  Tensor w = randn(c.wshape).requires_grad_();
  Engine eng(m);
  CaseRun r;
  for (int s = 0; s < kSteps; ++s) {
    bool bad = s == kBadStep;
    if (bad) r.traces_before_bad = eng.stats().traces;
    Tensor idx = c.index(s, bad);
    try {
      auto step = eng.step();
      Tensor h = c.pre(w);
      Tensor y;
      try {
        y = c.op(h, idx);
      } catch (const std::invalid_argument& e) {
        r.call_error = e.what();
        throw;
      }
      Tensor loss = (h * h).mean() + (y * y).mean();
      loss.backward();
      {
        NoGradGuard ng;
        w.sub_(w.grad() * 0.05);
        w.set_grad({});
      }
      r.losses.push_back(loss.item<float>());
    } catch (const std::exception& e) {
      if (r.call_error.empty() || !bad) r.later_error += std::string(e.what()) + "; ";
    }
  }
  eng.synchronize();
  r.w = w.to_vector<float>();
  return r;
}

Tensor ints(std::vector<int64_t> v, Shape s) { return tensor(std::move(v), std::move(s)); }
Tensor identity(const Tensor& w) { return w * 1.0; }

std::vector<ValueCase> cases() {
  std::vector<ValueCase> c;
  c.push_back({"cross_entropy", {4, 3},
               [](int s, bool bad) {
                 return bad ? ints({0, 1, 3, 2}, {4}) : ints({s % 3, (s + 1) % 3, (s + 2) % 3, 0}, {4});
               },
               identity, [](const Tensor& h, const Tensor& t) { return cross_entropy(h, t); },
               "[nll_loss] target 3 at position 2 is out of range for 3 classes"});
  c.push_back({"nll_loss", {4, 3},
               [](int s, bool bad) { return bad ? ints({0, -2, 1, 2}, {4}) : ints({s % 3, 1, 2, -100}, {4}); },
               [](const Tensor& w) { return log_softmax(w, 1); },
               [](const Tensor& h, const Tensor& t) { return nll_loss(h, t, -100, "sum"); },
               "[nll_loss] target -2 at position 1 is out of range for 3 classes"});
  c.push_back({"index_select", {4, 3},
               [](int s, bool bad) { return bad ? ints({1, 4}, {2}) : ints({s % 4, 3}, {2}); }, identity,
               [](const Tensor& h, const Tensor& i) { return index_select(h, 0, i); },
               "[index_select] index 4 is out of range for dim 0 of size 4"});
  c.push_back({"gather", {4, 3},
               [](int s, bool bad) {
                 return bad ? ints({0, 1, 2, 0, 1, 2, -1, 0}, {4, 2}) : ints({s % 3, 1, 2, 0, 1, 2, 0, 0}, {4, 2});
               },
               identity, [](const Tensor& h, const Tensor& i) { return gather(h, 1, i); },
               "[gather] index -1 is out of range for dim 1 of size 3"});
  c.push_back({"embedding", {5, 3},
               [](int s, bool bad) { return bad ? ints({0, 5, 1}, {3}) : ints({s % 5, 4, 0}, {3}); },
               [](const Tensor& w) { return w; },  // the leaf parameter itself, updated in place each step
               [](const Tensor& h, const Tensor& i) { return embedding(h, i); },
               "[embedding] index 5 is out of range for an embedding table of size 5"});
  c.push_back({"embedding_backward", {3, 2},
               [](int s, bool bad) { return bad ? ints({0, 1, 7}, {3}) : ints({s % 5, 4, 0}, {3}); }, identity,
               [](const Tensor& h, const Tensor& i) { return embedding_backward(h, i, 5, -1); },
               "[embedding_backward] index 7 is out of range for an embedding table of size 5"});
  c.push_back({"index_select_backward", {2, 3},
               [](int s, bool bad) { return bad ? ints({2, -3}, {2}) : ints({s % 4, 1}, {2}); }, identity,
               [](const Tensor& h, const Tensor& i) { return index_select_backward(h, {4, 3}, 0, i); },
               "[index_select_backward] index -3 is out of range for dim 0 of size 4"});
  c.push_back({"gather_backward", {2, 2},
               [](int s, bool bad) { return bad ? ints({0, 1, 9, 0}, {2, 2}) : ints({s % 3, 1, 2, 0}, {2, 2}); },
               identity, [](const Tensor& h, const Tensor& i) { return gather_backward(h, {2, 3}, 1, i); },
               "[gather_backward] index 9 is out of range for dim 1 of size 3"});
  c.push_back({"nll_loss_backward", {4, 3},
               [](int s, bool bad) { return bad ? ints({0, 1, 2, 3}, {4}) : ints({s % 3, 1, 2, 0}, {4}); },
               [](const Tensor& w) { return w.sum(); },
               [](const Tensor& g, const Tensor& t) { return nll_loss_backward(g, t, {4, 3}, -100, 1); },
               "[nll_loss] target 3 at position 3 is out of range for 3 classes"});
  c.push_back({"max_pool2d_backward", {1, 1, 2, 2},
               [](int s, bool bad) {
                 return bad ? ints({0, 3, 16, 5}, {1, 1, 2, 2}) : ints({s % 16, 3, 12, 15}, {1, 1, 2, 2});
               },
               identity, [](const Tensor& g, const Tensor& i) { return max_pool2d_backward(g, i, {1, 1, 4, 4}); },
               "[max_pool2d_backward] index 16 at position 2 is out of range for an input plane of 4x4 elements"});
  return c;
}

class ValueChecks : public ::testing::TestWithParam<ValueCase> {};

TEST_P(ValueChecks, RaisedAtTheCallSiteInEveryModeAndTheEngineKeepsWorking) {
  const ValueCase& c = GetParam();
  CaseRun eager = run_case(c, Mode::Eager);
  EXPECT_EQ(eager.call_error, c.message);
  EXPECT_EQ(eager.later_error, "");
  ASSERT_EQ(eager.losses.size(), size_t(kSteps - 1));
  for (Mode m : {Mode::Lazy, Mode::CoExecution}) {
    SCOPED_TRACE(mode_name(m));
    CaseRun r = run_case(c, m);
    EXPECT_EQ(r.call_error, eager.call_error);
    EXPECT_EQ(r.later_error, "");
    EXPECT_EQ(r.losses, eager.losses);  // bit-identical, the bad step included in neither
    EXPECT_EQ(r.w, eager.w);
    if (m == Mode::CoExecution) EXPECT_LT(r.traces_before_bad, kBadStep);  // the bad step ran the skeleton
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, ValueChecks, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ValueCase>& i) { return std::string(i.param.name); });

// ---- integer division

const std::string kDivZero =
    "[div_] integer division by zero: the int64 divisor of shape [3] has a zero element (dividend of shape [3])";

// c = a.clone() (in-graph in lazy/coexec) divided in place by a host-fed divisor, a zero at kBadStep.
struct DivRun {
  std::string call_error, later_error;
  std::vector<std::vector<int64_t>> values;
};
DivRun run_div(Mode m) {
  Engine eng(m);
  DivRun r;
  for (int s = 0; s < kSteps; ++s) {
    bool bad = s == kBadStep;
    Tensor a = ints({7 + s, -7, std::numeric_limits<int64_t>::min()}, {3});
    Tensor d = bad ? ints({2, 0, -1}, {3}) : ints({2, -3 - s, -1}, {3});
    try {
      auto step = eng.step();
      Tensor c = a.clone();
      try {
        c.div_(d);
      } catch (const std::invalid_argument& e) {
        r.call_error = e.what();
        throw;
      }
      r.values.push_back((c + 1).to_vector<int64_t>());
    } catch (const std::exception& e) {
      if (r.call_error.empty() || !bad) r.later_error += std::string(e.what()) + "; ";
    }
  }
  return r;
}

TEST(IntegerDivision, ByZeroRaisesAtTheCallSiteInEveryMode) {
  DivRun eager = run_div(Mode::Eager);
  EXPECT_EQ(eager.call_error, kDivZero);
  EXPECT_EQ(eager.later_error, "");
  ASSERT_EQ(eager.values.size(), size_t(kSteps - 1));
  // Truncation, and INT64_MIN / -1 wraps to INT64_MIN (+1 after), as INT64_MIN * -1 does.
  EXPECT_EQ(eager.values[0], (std::vector<int64_t>{4, 3, std::numeric_limits<int64_t>::min() + 1}));
  for (Mode m : {Mode::Lazy, Mode::CoExecution}) {
    SCOPED_TRACE(mode_name(m));
    DivRun r = run_div(m);
    EXPECT_EQ(r.call_error, eager.call_error);
    EXPECT_EQ(r.later_error, "");
    EXPECT_EQ(r.values, eager.values);
  }
}

TEST(IntegerDivision, ScalarZeroAndBoolInEveryMode) {
  for (Mode m : kModes) {
    SCOPED_TRACE(mode_name(m));
    Engine eng(m);
    std::string got;
    try {
      auto step = eng.step();
      Tensor t = ints({1, 2}, {2});
      t.div_(scalar_like(t, 0));  // Python's `t /= 0`
    } catch (const std::invalid_argument& e) {
      got = e.what();
    }
    EXPECT_EQ(got, "[div_] integer division by zero: the int64 divisor of shape [] has a zero element "
                   "(dividend of shape [2])");
    got.clear();
    try {
      auto step = eng.step();
      Tensor b = tensor_bool({true, false}, {2});
      b.div_(tensor_bool({true, false}, {2}));
    } catch (const std::invalid_argument& e) {
      got = e.what();
    }
    EXPECT_EQ(got, "[div_] integer division by zero: the bool divisor of shape [2] has a zero element "
                   "(dividend of shape [2])");
    auto step = eng.step();
    Tensor t = ints({std::numeric_limits<int64_t>::min(), 9}, {2});
    t.div_(scalar_like(t, -1));
    EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -9}));
  }
}

// The kernels themselves (what the GraphRunner runs on in-graph values) refuse too, also when the
// zero sits in a chunk another OpenMP thread handles.
TEST(IntegerDivision, KernelsRefuseWithoutTheHook) {
  const int64_t n = 200000;
  std::vector<int64_t> av(size_t(n), 5), bv(size_t(n), 1);
  bv[size_t(n - 3)] = 0;
  Tensor a = ints(av, {n}), b = ints(bv, {n});
  for (const char* name : {"div", "div_"}) {
    const OpDef* op = find_op(name);
    ASSERT_NE(op, nullptr);
    std::vector<Tensor> in{a, b};
    TensorMetas meta = op->infer(in, {});
    try {
      execute_eager(*op, in, {}, meta, {});
      ADD_FAILURE() << name << ": no exception";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), std::string("[") + name +
                                           "] integer division by zero: the int64 divisor of shape [200000] has "
                                           "a zero element (dividend of shape [200000])");
    }
  }
  EXPECT_EQ(a.to_vector<int64_t>()[0], 5);  // refused before writing anything
  std::vector<int64_t> mv(size_t(n), std::numeric_limits<int64_t>::min());
  Tensor c = ints(mv, {n});
  std::vector<Tensor> in{c, scalar_like(c, -1)};
  execute_eager(*find_op("div_"), in, {}, TensorMetas{TensorMeta{{n}, DType::Int64}}, {});
  EXPECT_EQ(c.to_vector<int64_t>()[size_t(n - 1)], std::numeric_limits<int64_t>::min());
}

// In-graph divisor (no host value): the hook cannot look, the kernel raises where it runs (in
// co-execution on the GraphRunner, after good steps built the graph); the process survives and
// the engine stays usable.
TEST(IntegerDivision, InGraphZeroNeverCrashes) {
  for (Mode m : kModes) {
    SCOPED_TRACE(mode_name(m));
    Engine eng(m);
    std::string got;
    for (int s = 0; s < kSteps; ++s) {
      bool bad = s == kBadStep;
      try {
        auto step = eng.step();
        Tensor c = ints({4, 5, 6}, {3}).clone();
        c.div_(ints({1, bad ? 0 : 2, 2}, {3}).clone());
        std::vector<int64_t> v = c.to_vector<int64_t>();
        if (!bad) EXPECT_EQ(v, (std::vector<int64_t>{4, 2, 3}));
      } catch (const std::invalid_argument& e) {
        got += e.what();
      }
    }
    eng.synchronize();
    // Co-execution reports a runner's error at a later fetch or step: the runtime's part.
    if (m != Mode::CoExecution) EXPECT_EQ(got, kDivZero);
    else if (!got.empty()) EXPECT_NE(got.find("integer division by zero"), std::string::npos) << got;
    auto step = eng.step();
    EXPECT_EQ((ints({4, 6}, {2}).clone() * 2).to_vector<int64_t>(), (std::vector<int64_t>{8, 12}));
  }
}

// ---- kernels on the pool: an exception thrown in a chunk reaches the caller, and it is the one
// a serial loop would raise first (the lowest failing chunk's), whatever thread ran what.
TEST(ParallelFor, ExceptionInAWorkerIsRethrownOnTheCaller) {
  const int saved = num_threads();
  for (int t : {1, 2, 4}) {
    set_num_threads(t);
    for (int rep = 0; rep < 20; ++rep) {
      std::atomic<int64_t> seen{0};
      try {
        cpu::parallel_for(1 << 20, 1024, [&](int64_t b, int64_t e) {
          seen += e - b;
          if (b <= 300000 && 300000 < e) throw std::invalid_argument("[test] bad value at 300000");
          if (b <= 777777 && 777777 < e) throw std::invalid_argument("[test] bad value at 777777");
        });
        ADD_FAILURE() << "no exception";
      } catch (const std::invalid_argument& e) {
        EXPECT_EQ(std::string(e.what()), "[test] bad value at 300000") << t;
      }
      EXPECT_GE(seen.load(), 300001) << t;  // every chunk before the failing one ran
    }
  }
  set_num_threads(saved);
}

// max_pool2d_backward scatters through its indices in a parallel loop: a bad index is refused
// (hook and kernel alike) instead of writing outside the gradient.
TEST(ValueChecksKernels, MaxPoolBackwardRefusesIndicesOutsideThePlane) {
  const int64_t nc = 4096;
  std::vector<int64_t> iv(size_t(nc * 4), 3);
  iv[size_t(nc * 4 - 2)] = int64_t(1) << 40;
  Tensor idx = ints(iv, {1, nc, 2, 2}), g = ones({1, nc, 2, 2});
  const std::string msg = "[max_pool2d_backward] index 1099511627776 at position " + std::to_string(nc * 4 - 2) +
                          " is out of range for an input plane of 4x4 elements";
  const OpDef* op = find_op("max_pool2d_backward");
  ASSERT_NE(op, nullptr);
  std::vector<Tensor> in{g, idx};
  Attrs a{{"input_shape", Shape{1, nc, 4, 4}}};
  TensorMetas meta = op->infer(in, a);
  for (bool through_hook : {true, false}) {
    try {
      if (through_hook) max_pool2d_backward(g, idx, {1, nc, 4, 4});
      else execute_eager(*op, in, a, meta, {});
      ADD_FAILURE() << "no exception";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), msg);
    }
  }
}

}  // namespace
}  // namespace terra
