// A program that keeps a value of every step (a loss kept for logging, a view of it, a value read
// by the next step) must cost what the same tensors cost in eager. Each kept placeholder held its
// whole step's state — every position's cell, ~10-17 KB a step — so a co-executed loop keeping
// `loss.detach()` grew without bound (1500 steps of a small CNN: RSS 60 MB against eager's 26).
// A placeholder now takes its value once its step finished and lets the step's state go.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <terra/terra.h>

#include "terra/runtime/channel.h"

using namespace terra;
namespace F = terra::nn::functional;

namespace {

struct Kept {
  std::vector<Tensor> losses, views, carried;
};

// Each step's loss depends on the previous step's kept loss (a feed of an earlier step's
// placeholder), and every step keeps three placeholders: the loss, a view of it, and the carry.
Kept train(Mode mode, int steps) {
  manual_seed(3);
  nn::Linear fc1(8, 16), fc2(16, 4);
  std::vector<Tensor> params = fc1.parameters();
  for (const Tensor& p : fc2.parameters()) params.push_back(p);
  optim::Adam opt(params, 1e-2);
  Tensor x = randn({6, 8});
  Tensor y = tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1}, {6});
  Engine eng(mode);
  Kept k;
  Tensor carry = zeros({1});
  for (int s = 0; s < steps; ++s) {
    auto st = eng.step();
    Tensor h = F::relu(fc1(x + carry * 1e-3));
    Tensor loss = F::cross_entropy(fc2(h), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    carry = loss.detach().reshape({1});
    k.losses.push_back(loss.detach());
    k.views.push_back(loss.detach().reshape({1, 1}));
    k.carried.push_back(carry);
  }
  eng.synchronize();
  return k;
}

float value(const Tensor& t) { return t.contiguous().item<float>(); }

// A small SGD loop; `keep` sees each step's loss inside its step.
void train_sgd(Mode mode, int steps, const std::function<void(const Tensor&)>& keep) {
  manual_seed(5);
  nn::Linear fc(8, 4);
  optim::SGD opt(fc.parameters(), 0.1);
  Tensor x = randn({5, 8});
  Tensor y = tensor(std::vector<int64_t>{0, 1, 2, 3, 0}, {5});
  Engine eng(mode);
  for (int s = 0; s < steps; ++s) {
    auto st = eng.step();
    Tensor loss = F::cross_entropy(fc(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    keep(loss);
  }
  eng.synchronize();
}

}  // namespace

TEST(KeptPlaceholders, ValuesKeptAcrossStepsDoNotKeepTheirStepsState) {
  const int steps = 120;
  const int64_t before = runtime::StepState::live();
  Kept co = train(Mode::CoExecution, steps);
  // synchronize() settled every step: no step's state outlives the engine (118 did before).
  EXPECT_EQ(runtime::StepState::live(), before) << "kept placeholders hold their steps' state";
  Kept eager = train(Mode::Eager, steps);
  ASSERT_EQ(co.losses.size(), eager.losses.size());
  for (size_t i = 0; i < eager.losses.size(); ++i) {
    float a = value(co.losses[i]), b = value(eager.losses[i]);
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "step " << i << ": " << a << " vs eager " << b;
    EXPECT_EQ(value(co.views[i]), b) << "step " << i;
    EXPECT_EQ(value(co.carried[i]), b) << "step " << i;
  }
}

TEST(KeptPlaceholders, LazyAndEagerKeepNoStepState) {
  const int64_t before = runtime::StepState::live();
  Kept lazy = train(Mode::Lazy, 30);
  Kept eager = train(Mode::Eager, 30);
  EXPECT_EQ(runtime::StepState::live(), before);
  for (size_t i = 0; i < eager.losses.size(); ++i) EXPECT_EQ(value(lazy.losses[i]), value(eager.losses[i]));
}

// Another thread reads kept values while the host thread settles and releases their steps (each
// begin_step does; Python's synchronize() does it without the GIL). Each value is read by that
// thread only, so the reads race with settling and nothing else.
TEST(KeptPlaceholders, ReadOnAnotherThreadWhileTheHostSettles) {
  const int steps = 80;
  std::vector<float> eager_losses;
  train_sgd(Mode::Eager, steps, [&](const Tensor& loss) { eager_losses.push_back(loss.item<float>()); });
  std::mutex m;
  std::vector<Tensor> kept;
  std::vector<float> seen(size_t(steps), -1.0f);
  std::atomic<bool> done{false};
  std::thread reader([&] {
    size_t next = 0;
    while (next < size_t(steps)) {
      Tensor t;
      {
        std::lock_guard<std::mutex> g(m);
        if (next < kept.size()) t = kept[next];
      }
      if (!t.defined()) {
        if (done.load()) break;
        std::this_thread::yield();
        continue;
      }
      seen[next++] = t.item<float>();
    }
  });
  train_sgd(Mode::CoExecution, steps, [&](const Tensor& loss) {
    std::lock_guard<std::mutex> g(m);
    kept.push_back(loss.detach());
  });
  done = true;
  reader.join();
  for (size_t i = 0; i < size_t(steps); ++i) EXPECT_EQ(seen[i], eager_losses[i]) << "step " << i;
}

// The host finds the placeholders still alive on their slots' lists, which a placeholder dying on
// another thread leaves under the slot's lock. Here another thread drops kept values, both outputs
// of one call split between the two threads, while the host settles and releases their steps.
TEST(KeptPlaceholders, DroppedOnAnotherThreadWhileTheHostSettles) {
  const int steps = 60;
  const int64_t before = runtime::StepState::live();
  auto run = [&](Mode mode, std::vector<float>* sums) {
    manual_seed(9);
    Tensor a = randn({4, 6}), b = randn({6, 3});
    Engine eng(mode);
    std::mutex m;
    std::vector<Tensor> handed;
    std::atomic<bool> done{false};
    std::vector<float> seen;
    std::thread dropper([&] {
      for (;;) {
        std::vector<Tensor> mine;
        {
          std::lock_guard<std::mutex> g(m);
          mine.swap(handed);
        }
        // Every other one is read before it dies: settled and unsettled values both die here.
        for (size_t i = 0; i < mine.size(); ++i)
          if (i % 2 == 0) seen.push_back(mine[i].sum().item<float>());
        mine.clear();
        if (done.load() && [&] { std::lock_guard<std::mutex> g(m); return handed.empty(); }()) break;
        std::this_thread::yield();
      }
    });
    std::vector<Tensor> host_kept;
    for (int s = 0; s < steps; ++s) {
      auto st = eng.step();
      Tensor go = matmul(a, b) * (1.0 + 0.01 * s);
      TensorList g = matmul_backward(go, a, b, a.shape(), b.shape());  // two outputs, one position
      Tensor loss = (g[0] * g[0]).sum() + (g[1] * g[1]).sum();
      {
        std::lock_guard<std::mutex> l(m);
        handed.push_back(g[0]);
        handed.push_back(loss);
      }
      host_kept.push_back(g[1]);
      if (host_kept.size() > 3) host_kept.erase(host_kept.begin());  // dies on the host, a few steps later
      // Read inside the step while the other thread may be waiting on it too: one waiter leaving
      // once withdrew the other's request, and the runner held its ops for a sleeping host.
      if (s % 5 == 0) sums->push_back(g[1].sum().item<float>());
    }
    done = true;
    dropper.join();
    eng.synchronize();
    host_kept.clear();
    sums->insert(sums->end(), seen.begin(), seen.end());
  };
  std::vector<float> eager, co;
  run(Mode::Eager, &eager);
  run(Mode::CoExecution, &co);
  EXPECT_EQ(runtime::StepState::live(), before) << "a step's state outlived its placeholders";
  ASSERT_EQ(co.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_EQ(co[i], eager[i]) << "value " << i;
}
