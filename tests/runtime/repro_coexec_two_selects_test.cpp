// Repro (found by programs/gpt2, bert_qa, music_transformer via nn::MultiheadAttention's
// qkv.select(0, 0/1/2)): two select() views of one tensor feeding the loss. In co-execution, with
// the loss fetched every step (as here), the GraphRunner throws "internal: expected validation of
// node N at position N-2"; with the losses fetched only after the loop, the co-executed steps
// silently stop updating the weight (the loss repeats step 3's value) while eager learns.
// Two slice() views of the same tensor instead work. Likely one cause: two gradient contributions
// to one tensor are summed during backward.
#include <gtest/gtest.h>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

void two_selects(Engine& engine, const std::function<void(const Tensor&)>& observe) {
  Tensor w = randn({12, 4}) * 0.3;
  w.requires_grad_();
  Tensor x = randn({2, 6, 4});
  for (int it = 0; it < 6; ++it) {
    auto step = engine.step();
    Tensor p = matmul(x, w.t()).reshape({2, 6, 3, 4});
    Tensor loss = (p.select(2, 0) * p.select(2, 1)).sum();
    loss.backward();
    {
      NoGradGuard g;
      w.sub_(w.grad() * 0.01);
      w.set_grad({});
    }
    observe(loss);
  }
}

// The same symptom without views of an activation: one weight used by two matmuls (also seen with
// one Conv2d applied twice). The weight's two gradient contributions are accumulated.
void weight_used_twice(Engine& engine, const std::function<void(const Tensor&)>& observe) {
  Tensor w = randn({12, 4}) * 0.3;
  w.requires_grad_();
  Tensor x = randn({2, 6, 4});
  for (int it = 0; it < 6; ++it) {
    auto step = engine.step();
    Tensor loss = (matmul(x * 1.0, w.t()) * 2.0).sum() + matmul(x, w.t()).sum();
    loss.backward();
    {
      NoGradGuard g;
      w.sub_(w.grad() * 0.01);
      w.set_grad({});
    }
    observe(loss);
  }
}

}  // namespace

TEST(ReproCoExec, WeightUsedByTwoMatmuls) {
  Observed eager = run_in_mode(Mode::Eager, weight_used_twice);
  Observed co = run_in_mode(Mode::CoExecution, weight_used_twice);
  expect_same(eager, co, "coexec");
}

TEST(ReproCoExec, TwoSelectsOfOneTensor) {
  Observed eager = run_in_mode(Mode::Eager, two_selects);
  Observed co = run_in_mode(Mode::CoExecution, two_selects);
  expect_same(eager, co, "coexec");
}
