// Repro from the benchmarks (bench/mlp_bench.cpp): co-execution of a two-layer network (two chained
// matmuls of different shapes, manual SGD) gives values different from eager, and with a loss fetch
// inside the step the GraphRunner throws "[GraphRunner] internal: ...". Same program, same seeds.
// A one-layer model (engine_basic_test) is fine; the failure needs two layers of different shapes
// (the backward ops of both layers are called from the same user location, loss.backward()).
#include <gtest/gtest.h>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

void two_layer(Engine& engine, const std::function<void(const Tensor&)>& observe, bool fetch_loss) {
  Tensor x = randn({4, 8});
  Tensor w1 = randn({8, 4});
  w1.requires_grad_();
  Tensor w2 = randn({4, 3});
  w2.requires_grad_();
  for (int it = 0; it < 6; ++it) {
    auto step = engine.step();
    Tensor loss = matmul(matmul(x, w1), w2).sum();
    loss.backward();
    {
      NoGradGuard ng;
      w1.sub_(w1.grad() * 0.01);
      w2.sub_(w2.grad() * 0.01);
      w1.set_grad({});
      w2.set_grad({});
    }
    if (fetch_loss) observe(loss);
  }
  observe(w1);
  observe(w2);
}

}  // namespace

TEST(ReproBench, TwoLayerCoExecutionMatchesEager) {
  auto prog = [](Engine& e, const std::function<void(const Tensor&)>& obs) { two_layer(e, obs, false); };
  Observed eager = run_in_mode(Mode::Eager, prog);
  Observed co = run_in_mode(Mode::CoExecution, prog);
  expect_same(eager, co, "coexec");
}

TEST(ReproBench, TwoLayerCoExecutionWithLossFetch) {
  auto prog = [](Engine& e, const std::function<void(const Tensor&)>& obs) { two_layer(e, obs, true); };
  Observed eager = run_in_mode(Mode::Eager, prog);
  Observed co;
  ASSERT_NO_THROW(co = run_in_mode(Mode::CoExecution, prog));
  expect_same(eager, co, "coexec");
}
