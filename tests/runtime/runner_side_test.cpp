// The GraphRunner's side-by-side execution (runtime/runner_side.cpp): a heavy op on a spare core
// while the runner runs the ops after it that do not read it. Values stay eager's bit for bit,
// errors arrive as eager raises them (the earliest position first), and the switch turns it off.
// Three threads make a core spare even while the host runs, so the tests do not depend on timing.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <terra/compile/passes.h>
#include <terra/terra.h>

using namespace terra;
namespace F = terra::nn::functional;

namespace {

struct ThreeThreads {
  int prev = num_threads();
  ThreeThreads() { set_num_threads(3); }
  ~ThreeThreads() { set_num_threads(prev); }
};

struct Trained {
  std::vector<float> losses, params;
  std::vector<std::string> errors;
  Stats stats;
};

// A 3-layer MLP whose products (64 x 128 x 128) are heavy enough to hand off; backward has two
// independent products per layer.
Trained train_mlp(Mode m, int steps = 8) {
  manual_seed(3);
  nn::Linear l1(128, 128), l2(128, 128), l3(128, 10);
  optim::Adam opt([&] {
    std::vector<Tensor> ps;
    for (nn::Linear* l : {&l1, &l2, &l3})
      for (const Tensor& p : l->parameters()) ps.push_back(p);
    return ps;
  }(), 1e-3);
  Trained r;
  {
    Engine eng(m);
    for (int s = 0; s < steps; ++s) {
      auto st = eng.step();
      Tensor x = randn({64, 128});
      Tensor y = tensor(std::vector<int64_t>(64, s % 10), {64});
      Tensor loss = F::cross_entropy(l3(F::relu(l2(F::relu(l1(x))))), y);
      r.losses.push_back(loss.item<float>());
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    eng.synchronize();
    r.stats = eng.stats();
  }
  for (nn::Linear* l : {&l1, &l2, &l3})
    for (const Tensor& p : l->parameters())
      for (float v : p.to_vector<float>()) r.params.push_back(v);
  return r;
}

// A heavy product followed by a loss whose class index is computed in the graph (and a second
// product): at step `bad` the index is out of range, an error the runner raises while the first
// product runs beside it.
Trained late_error_beside_a_product(Mode m, int bad = 3, int steps = 7) {
  manual_seed(5);
  Tensor w = randn({64, 64}).requires_grad_(true);
  Tensor w2 = randn({64, 64}).requires_grad_(true);
  Tensor z = randn({6, 4}).requires_grad_(true);
  optim::SGD opt({w, w2, z}, 0.01);
  Trained r;
  {
    Engine eng(m);
    for (int s = 0; s < steps; ++s) {
      Tensor h;
      try {
        auto st = eng.step();
        Tensor x = full({64, 64}, 0.01f * float(s + 1));
        Tensor y = tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1}, {6});
        Tensor shift = tensor(std::vector<int64_t>{0, 0, 0, 0, 0, s == bad ? 8 : 0}, {6});
        Tensor target = y + shift;                // in the graph: its range check runs where it is computed
        h = matmul(x, w);                         // the heavy op
        Tensor ce = F::cross_entropy(z, target);  // does not read h: runs beside it
        Tensor h2 = matmul(x, w2);                // (the work that makes the hand-off worth it)
        Tensor loss = h.mean() + h2.mean() + ce;
        opt.zero_grad();
        loss.backward();
        opt.step();
        r.losses.push_back(loss.item<float>());
      } catch (const std::exception& e) {
        r.errors.push_back(e.what());
        try {  // the product ran before the failing op: its value is there, as in eager
          r.losses.push_back(h.sum().item<float>());
        } catch (const std::exception& e2) {
          r.errors.push_back(std::string("product lost: ") + e2.what());
        }
      }
    }
    try {
      eng.synchronize();
    } catch (const std::exception& e) {
      r.errors.push_back(e.what());
    }
    r.stats = eng.stats();
  }
  for (const Tensor& p : {w, w2, z})
    for (float v : p.to_vector<float>()) r.params.push_back(v);
  return r;
}

}  // namespace

TEST(SideBySide, ProductsRunBesideEachOtherAndStayBitIdentical) {
  ThreeThreads three;
  Trained eager = train_mlp(Mode::Eager);
  Trained co = train_mlp(Mode::CoExecution);
  EXPECT_GT(co.stats.side_heavy_ops, 0) << "no product ran on a spare core";
  EXPECT_GT(co.stats.side_ops, 0);
  EXPECT_EQ(co.losses, eager.losses);
  EXPECT_EQ(co.params, eager.params);
}

TEST(SideBySide, SwitchedOffRunsOneByOneWithTheSameValues) {
  ThreeThreads three;
  compile::set_pass_enabled(compile::Pass::SideBySide, false);
  Trained off = train_mlp(Mode::CoExecution);
  compile::set_pass_enabled(compile::Pass::SideBySide, true);
  Trained eager = train_mlp(Mode::Eager);
  EXPECT_EQ(off.stats.side_heavy_ops, 0);
  EXPECT_EQ(off.losses, eager.losses);
  EXPECT_EQ(off.params, eager.params);
}

TEST(SideBySide, AnErrorBesideAProductIsEagersAndLosesNothing) {
  ThreeThreads three;
  Trained eager = late_error_beside_a_product(Mode::Eager);
  ASSERT_EQ(eager.errors.size(), 1u);
  EXPECT_EQ(eager.errors[0].rfind("[nll_loss] target 9", 0), 0u) << eager.errors[0];
  Trained co = late_error_beside_a_product(Mode::CoExecution);
  EXPECT_GT(co.stats.side_heavy_ops, 0) << "the product never ran beside the loss";
  ASSERT_EQ(co.errors.size(), 1u);
  EXPECT_EQ(co.errors[0].rfind(eager.errors[0], 0), 0u) << co.errors[0];
  EXPECT_EQ(co.losses, eager.losses);
  EXPECT_EQ(co.params, eager.params);
}
