// The fused ops (cross_entropy, linear with its bias) run in every mode: eager, lazy and
// co-execution must observe bit-identical losses, gradients and parameters.
#include <gtest/gtest.h>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

using Observe = std::function<void(const Tensor&)>;

void expect_all_modes_equal(const std::function<void(Engine&, const Observe&)>& program) {
  Observed eager = run_in_mode(Mode::Eager, program);
  Observed lazy = run_in_mode(Mode::Lazy, program);
  Observed co = run_in_mode(Mode::CoExecution, program);
  ASSERT_FALSE(eager.values.empty());
  expect_same(eager, lazy, "lazy");
  expect_same(eager, co, "coexec");
}

Tensor batch(int i, Shape s) {
  std::vector<float> v(size_t(numel_of(s)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = float(int((k * 7 + size_t(i) * 13) % 17) - 8) / 4.0f;
  return tensor(v, std::move(s));
}

}  // namespace

// An MLP of nn::Linear layers (fused GEMM + bias + relu, then GEMM + bias; 2-D and batched 3-D
// inputs) trained on the fused cross_entropy with each reduction and an ignored class.
TEST(FusedOpsModes, LinearAndCrossEntropyTrainIdentically) {
  for (std::string red : {"mean", "sum", "none"})
    expect_all_modes_equal([red](Engine& e, const Observe& obs) {
      manual_seed(3);
      nn::Sequential mlp(nn::Linear(12, 32), nn::ReLU(), nn::Linear(32, 5));  // linear_relu, then linear
      optim::SGD opt(mlp.parameters(), 0.05, 0.9);
      for (int i = 0; i < 12; ++i) {
        auto step = e.step();
        Tensor x = batch(i, i % 2 ? Shape{8, 12} : Shape{2, 4, 12});
        Tensor logits = mlp(x).reshape({8, 5});
        Tensor y = tensor(std::vector<int64_t>{i % 5, 1, 2, 3, 4, 0, (i + 2) % 5, 2}, {8});
        Tensor loss = cross_entropy(logits, y, 2, red);
        if (red == "none") loss = loss.sum();
        opt.zero_grad();
        loss.backward();
        opt.step();
        obs(loss);
      }
      for (const Tensor& p : mlp.parameters()) obs(p);
    });
}

// Spatial logits [N, C, H, W] (per-pixel classes, as a segmentation loss).
TEST(FusedOpsModes, SpatialCrossEntropyTrainsIdentically) {
  expect_all_modes_equal([](Engine& e, const Observe& obs) {
    manual_seed(4);
    Tensor w;
    {
      NoGradGuard ng;
      w = randn({3, 4, 1, 1}) * 0.5;
    }
    w.requires_grad_();
    for (int i = 0; i < 8; ++i) {
      auto step = e.step();
      Tensor x = batch(i, {2, 3, 5, 5});
      Tensor logits = (x.unsqueeze(2) * w.unsqueeze(0)).sum({1});  // [2, 4, 5, 5]
      std::vector<int64_t> t(50);
      for (size_t k = 0; k < t.size(); ++k) t[k] = int64_t((k + size_t(i)) % 5) - 1;  // -1 is ignored
      Tensor loss = cross_entropy(logits, tensor(t, {2, 5, 5}), -1);
      loss.backward();
      {
        NoGradGuard ng;
        w.sub_(w.grad() * 0.1);
        w.set_grad({});
      }
      obs(loss);
    }
    obs(w);
  });
}
