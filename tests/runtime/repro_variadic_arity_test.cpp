// Repro: one call site of a variadic op (cat, stack, an optimizer's fused update) whose input count
// changes from step to step. The TraceGraph matched the call by op, location and attributes only,
// so a cat of 3 tensors took the node of a cat of 2, and co-execution read past the node's
// per-input sources (a segfault). The input count is now part of the call's identity.
#include <gtest/gtest.h>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

void cat_of_varying_length(Engine& engine, const std::function<void(const Tensor&)>& observe) {
  Tensor a = randn({2, 3});
  for (int step = 0; step < 12; ++step) {
    auto s = engine.step();
    std::vector<Tensor> parts;
    for (int i = 0; i < 2 + step % 3; ++i) parts.push_back(a * double(i + 1));  // one call site
    Tensor y = cat(parts, 0);
    Tensor z = stack(parts, 0).sum();
    observe(y.sum() + z);
  }
}

}  // namespace

TEST(VariadicArity, CatAndStackOfChangingLengthMatchEagerInEveryMode) {
  Observed eager = run_in_mode(Mode::Eager, cat_of_varying_length);
  ASSERT_EQ(eager.values.size(), 12u);
  for (Mode m : {Mode::Lazy, Mode::CoExecution}) {
    Observed o = run_in_mode(m, cat_of_varying_length);
    expect_same(eager, o, mode_name(m));
  }
  // Three lengths: three paths, after which co-execution runs them all from the graph.
  Observed co = run_in_mode(Mode::CoExecution, cat_of_varying_length);
  EXPECT_LE(co.stats.traces, 4);
}
