// The co-executing host skips shape inference for a predicted call whose inputs have the shapes and
// dtypes of the node's last call (SkeletonExec::known_outputs): the kept output metas stand. Any
// other input shape or dtype at the same call must infer again, give eager's shapes and values, and
// raise eager's error at the call when the shapes no longer fit.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <terra/terra.h>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

// One call site sees rows 4, 4, 2, 4, 1, ... and, every fifth step, float64 inputs. Records each
// step's output values and shape.
void varying_rows(Engine& e, const std::function<void(const Tensor&)>& observe) {
  Tensor b = tensor({0.5f, -1.0f, 2.0f}, {3});
  Tensor w = tensor({1.5f, 0.25f, -0.75f}, {3});
  const int64_t rows[] = {4, 4, 2, 4, 1, 4, 4, 3};
  for (int s = 0; s < 24; ++s) {
    auto st = e.step();
    const int64_t r = rows[s % 8];
    std::vector<float> v;
    for (int64_t i = 0; i < r * 3; ++i) v.push_back(float((i * 7 + s) % 11) - 5.0f);
    Tensor x = tensor(v, {r, 3});
    Tensor bb = b, ww = w;
    if (s % 5 == 4) {
      x = x.to(DType::Float64);
      bb = b.to(DType::Float64);
      ww = w.to(DType::Float64);
    }
    Tensor y = (x + bb) * ww;  // the calls whose metas are kept
    Tensor z = y.sum({0});
    observe(y);
    observe(z);
    observe(tensor({float(y.dim()), float(y.size(0)), float(y.size(1)), float(int(y.dtype()))}, {4}));
  }
}

}  // namespace

TEST(KnownMetas, InputShapesAndDtypesChangingAtAPredictedCallMatchEager) {
  Observed eager = run_in_mode(Mode::Eager, varying_rows);
  for (Mode m : {Mode::Lazy, Mode::CoExecution}) {
    Observed other = run_in_mode(m, varying_rows);
    expect_same(eager, other, m == Mode::Lazy ? "lazy" : "coexec");
    if (m == Mode::CoExecution) EXPECT_GT(other.stats.predicted_calls, 0) << "the known path never ran";
  }
}

// After steps that keep the add's metas, inputs that no longer broadcast raise eager's error at
// the call, in every mode, and the engine goes on.
TEST(KnownMetas, ShapesThatNoLongerFitRaiseAtTheCallInEveryMode) {
  for (Mode m : {Mode::Eager, Mode::Lazy, Mode::CoExecution}) {
    Engine e(m);
    Tensor b = tensor({0.5f, -1.0f, 2.0f}, {3});
    std::vector<float> sums;
    for (int s = 0; s < 12; ++s) {
      auto st = e.step();
      const bool bad = s == 7;
      const int64_t cols = bad ? 5 : 3;  // host data (a feed): no op whose attributes carry the shape
      Tensor x = tensor(std::vector<float>(size_t(2 * cols), float(s)), {2, cols});
      Tensor y;
      try {
        y = x + b;  // one call site for every step
        if (bad) ADD_FAILURE() << "no error at the call for shapes [2, 5] and [3]";
      } catch (const std::invalid_argument& err) {
        if (!bad) throw;
        EXPECT_NE(std::string(err.what()).find("[add]"), std::string::npos) << err.what();
        continue;
      }
      sums.push_back(y.sum().item<float>());
    }
    ASSERT_EQ(sums.size(), 11u);
    for (size_t i = 0; i < sums.size(); ++i) {
      const int s = int(i) < 7 ? int(i) : int(i) + 1;
      EXPECT_EQ(sums[i], float(6 * s + 3)) << "step " << s;
    }
  }
}
