// Co-execution and lazy mode with the elementwise-fusion pass: every fusible op in chains that end in
// reductions, host-held intermediates, in-place updates of variables (an optimizer), and a
// fallback that lands inside a fused segment. Values must be bit-identical to eager, with the pass
// on (checked to have fused) and off, at 1 and 2 threads.
#include <gtest/gtest.h>

#include <terra/terra.h>

#include "terra/compile/passes.h"
#include "runtime/mode_harness.h"

namespace terra::testing {
namespace {

using Obs = std::function<void(const Tensor&)>;

// One step's elementwise work over w's shape; `odd` changes the path inside the update chain.
void chain_step(const Tensor& w, const Tensor& m, const Tensor& v, const Tensor& mask, int s, bool odd,
                const Obs& observe) {
  Tensor x = randn(w.shape());
  Tensor a = x * 0.5 + w;
  Tensor b = tanh(a);  // held by the host until the step's end: must be written out
  Tensor c = sigmoid(b) * exp(neg(abs(a)));
  Tensor d = sqrt(abs(c) + 1e-3);
  Tensor e = log(d + 1.0) - 0.1;
  Tensor f = relu(e) + leaky_relu(a, 0.2) + gelu(a) + softplus(a, 2.0, 10.0) + gelu(a, true);
  Tensor g = where(mask, f, neg(f));
  Tensor h = clamp(masked_fill(g, mask, 0.25), -1.0, 1.0);
  Tensor k = maximum(h, c) - minimum(h, b) + pow(h, 2.0) + pow(abs(h) + 1.0, h) * rsqrt(d) + sign(e);
  Tensor k64 = k.to(DType::Float64) * 3.0;
  Tensor k32 = (k64 / 7.0).to(DType::Float32);
  observe(k32.sum());
  // An optimizer-like update of variables in place (Adam's shape of chain).
  NoGradGuard ng;
  m.mul_(0.9).add_(k32, 0.1);
  if (odd) v.sub_(k32 * 0.001);
  v.mul_(0.99);
  add_inplace(v, k32 * (k32 * 0.01));
  Tensor denom = sqrt(v) / 1.5 + 1e-8;
  add_inplace(w, (m / denom) * -0.001);
  observe(b.sum() + double(s));
}

void chain_program(Engine& engine, const Obs& observe, int steps, int odd_step) {
  Tensor w = randn({257, 131});  // 33667 elements: more than one parallel chunk
  Tensor m = zeros({257, 131}), v = ones({257, 131});
  Tensor mask = gt(randn({257, 131}), 0.3);
  for (int s = 0; s < steps; ++s) {
    Step st = engine.step();
    chain_step(w, m, v, mask, s, s == odd_step, observe);
  }
  observe(w);
  observe(m);
  observe(v);
}

struct PassGuard {
  explicit PassGuard(bool on) { compile::set_pass_enabled(compile::Pass::FuseElementwise, on); }
  ~PassGuard() { compile::set_pass_enabled(compile::Pass::FuseElementwise, true); }
};
struct ThreadsGuard {
  int old = num_threads();
  explicit ThreadsGuard(int n) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(old); }
};

// Co-execution and lazy mode give eager's values on `prog` and fuse at least one kernel.
template <class Prog>
void expect_graph_modes_fuse_like_eager(const Prog& prog, uint64_t seed) {
  for (Mode m : {Mode::CoExecution, Mode::Lazy}) {
    Observed eager = run_in_mode(Mode::Eager, prog, seed);
    Observed other = run_in_mode(m, prog, seed);
    expect_same(eager, other, mode_name(m));
    EXPECT_GT(other.stats.fused_kernels, 0) << mode_name(m);
  }
}

TEST(Fusion, ChainsAndUpdatesAreBitIdenticalToEager) {
  for (int threads : {1, 2}) {
    ThreadsGuard tg(threads);
    auto prog = [](Engine& e, const Obs& o) { chain_program(e, o, 12, -1); };
    Observed eager = run_in_mode(Mode::Eager, prog, 7);
    Observed co = run_in_mode(Mode::CoExecution, prog, 7);
    Observed lazy = run_in_mode(Mode::Lazy, prog, 7);
    expect_same(eager, co, "coexec");
    expect_same(eager, lazy, "lazy");
    EXPECT_GT(lazy.stats.fused_ops, 3 * lazy.stats.fused_kernels);
    EXPECT_GT(lazy.stats.fused_kernels, 0);
    // The pass ran: Adam-like updates and the forward chains became fused kernels.
    EXPECT_GT(co.stats.fused_kernels, 0) << threads << " threads";
    EXPECT_GT(co.stats.fused_ops, 3 * co.stats.fused_kernels);
    {
      PassGuard off(false);
      Observed plain = run_in_mode(Mode::CoExecution, prog, 7);
      Observed plain_lazy = run_in_mode(Mode::Lazy, prog, 7);
      expect_same(eager, plain, "coexec without fusion");
      expect_same(eager, plain_lazy, "lazy without fusion");
      EXPECT_EQ(plain.stats.fused_kernels + plain_lazy.stats.fused_kernels, 0);
    }
  }
}

// A value only the host holds — read by nothing else in its step, fed into the next step — is
// written out by the fused kernel (the runner sees the placeholder alive), never left in a tile.
TEST(Fusion, ValuesTheHostKeepsAcrossStepsAreWrittenOut) {
  auto prog = [](Engine& engine, const Obs& observe) {
    Tensor w = randn({300, 41});
    Tensor carry = zeros({300, 41});
    for (int s = 0; s < 10; ++s) {
      Step st = engine.step();
      Tensor u = tanh(w * 0.5 + carry);
      Tensor v = u * 3.0 + 1.0;  // u's only reader in the graph is inside the segment
      Tensor half;  // read by a later op, then held only through a detached copy
      Tensor v2 = [&] {
        Tensor m2 = v * 0.5;
        half = m2.detach();
        return m2 + 1.0;
      }();
      observe(v.sum() + v2.sum());
      carry = u;                  // the next step reads it as a feed
      NoGradGuard ng;
      add_inplace(w, v * 0.001);
      observe(half);
    }
    observe(carry);
    observe(w);
  };
  expect_graph_modes_fuse_like_eager(prog, 11);
}

// The host takes another path in the middle of a fused update chain: the ops it validated before
// the new one still run (unfused), and the next steps fuse again.
TEST(Fusion, FallbackInsideASegmentKeepsTheValidatedPrefix) {
  auto prog = [](Engine& e, const Obs& o) { chain_program(e, o, 14, 8); };
  Observed eager = run_in_mode(Mode::Eager, prog, 3);
  Observed co = run_in_mode(Mode::CoExecution, prog, 3);
  expect_same(eager, co, "coexec");
  EXPECT_GE(co.stats.fallbacks, 1);
  EXPECT_GT(co.stats.fused_kernels, 0);
}

// Shapes change between steps: a segment recorded for one shape runs unfused for another (and is
// recorded again), never with the old shape's plan.
TEST(Fusion, ShapeChangesReplanInsteadOfReusing) {
  auto prog = [](Engine& engine, const Obs& observe) {
    Tensor w = randn({64, 33});
    for (int s = 0; s < 12; ++s) {
      // Fed from outside the step: a full matrix, or one row broadcast over w every third step.
      Tensor x = randn({s % 3 == 2 ? 1 : 64, 33});
      Step st = engine.step();
      Tensor y = tanh(x * 0.3 + w) * 2.0 - 1.0;
      observe(y.sum());
      NoGradGuard ng;
      add_inplace(w, y * 0.01);
    }
    observe(w);
  };
  Observed eager = run_in_mode(Mode::Eager, prog, 5);
  Observed co = run_in_mode(Mode::CoExecution, prog, 5);
  expect_same(eager, co, "coexec");
  EXPECT_GT(co.stats.fused_kernels, 0);
}

// Lazy mode keeps each block's fused runs from one barrier to the next. A step with the same
// structure but other operands must not run a plan they do not fit: here an operand turns into a
// transposed (non-contiguous) view every third step, and every other step the value added in place
// overlaps its target at another offset (a tile would read rows the write had already changed).
TEST(Fusion, KeptPlansRunOnlyWhereTheStepsOperandsFitThem) {
  auto prog = [](Engine& engine, const Obs& observe) {
    Tensor w = randn({40, 40});
    Tensor plain = randn({40, 40});
    Tensor turned = randn({40, 40}).transpose(0, 1);
    Tensor buf = randn({40, 40});
    Tensor apart = randn({40, 40});
    observe(turned.sum() + buf.sum() + apart.sum());  // all computed before the steps
    for (int s = 0; s < 9; ++s) {
      Step st = engine.step();
      const Tensor& x = s % 3 == 1 ? turned : plain;
      Tensor y = tanh(x * 0.3 + w) * 2.0 - 1.0;
      observe(y.sum());
      NoGradGuard ng;
      add_inplace(w, y * 0.01);
      // Rows 10..29 of buf, plus rows 0..19 of buf or of another tensor: in buf, the value read at
      // element i was written at element i - 400 of the same pass.
      Tensor target = slice(buf, 0, 10, 30);
      Tensor other = slice(s % 2 ? buf : apart, 0, 0, 20);
      add_inplace(target, other * 0.5);
      observe(target.sum());
    }
    observe(w);
    observe(buf);
  };
  expect_graph_modes_fuse_like_eager(prog, 13);
}

}  // namespace
}  // namespace terra::testing
