// Repro (found by programs/faster_rcnn in Lazy mode): a view op (permute) of a value computed in an
// earlier lazy block — one that a fetch already flushed — then read through contiguous(), gives
// wrong values (elements repeated; with transpose even uninitialized memory) instead of eager's.
#include <gtest/gtest.h>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

void permute_after_fetch(Engine& engine, const std::function<void(const Tensor&)>& observe) {
  Tensor x = randn({2, 4, 2, 2});
  auto step = engine.step();
  Tensor y = x * 1.0;        // a lazy value of this step
  y.sum().item<double>();    // the fetch flushes the block that computes y
  observe(y.permute({0, 2, 3, 1}).contiguous());
}

}  // namespace

TEST(ReproLazy, PermuteOfValueFromFlushedBlock) {
  Observed eager = run_in_mode(Mode::Eager, permute_after_fetch);
  Observed lazy = run_in_mode(Mode::Lazy, permute_after_fetch);
  expect_same(eager, lazy, "lazy");
}
