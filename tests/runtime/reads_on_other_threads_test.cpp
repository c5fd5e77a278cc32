// Values of a co-executed step read on threads other than the host's while the host goes on: inside
// the step, across fallbacks (the program takes a new path every few steps), with the host waiting
// on the same step. Every value must equal eager's and nothing may hang. Two threads waiting on one
// step once withdrew each other's request to the runner (wait_step), which then held a fused
// segment's validated ops for a host that slept.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <mutex>
#include <thread>
#include <vector>

#include <terra/terra.h>

#include "terra/runtime/channel.h"

using namespace terra;
namespace F = terra::nn::functional;

namespace {

struct Handed {
  size_t index;  // where the value's sum goes
  Tensor value;
};

// A small MLP trained for `steps` steps; every third step takes another branch, and once (step 20)
// a branch never seen before. Each step hands its hidden activation and its loss to `readers`
// threads (round robin), which read them at once; the host itself reads the loss every fourth step.
// With `use_handed`, the host goes on to use the handed values as op inputs (a sum, a view, a
// product) while the readers read them: the readers' first read installs the value into the very
// tensor the host's op call reads. Returns every value read, by index (and the host's own sums).
std::vector<float> train(Mode mode, int steps, int readers, bool use_handed = false) {
  manual_seed(11);
  nn::Linear fc1(6, 12), fc2(12, 3);
  std::vector<Tensor> params = fc1.parameters();
  for (const Tensor& p : fc2.parameters()) params.push_back(p);
  optim::SGD opt(params, 0.05);
  Tensor x = randn({5, 6});
  Tensor y = tensor(std::vector<int64_t>{0, 1, 2, 0, 1}, {5});
  std::vector<float> out(size_t(steps) * 3 + 2, -1.0f);
  Tensor acc = zeros({1}), acc_h = zeros({12});
  std::mutex m;
  std::vector<std::vector<Handed>> queues{size_t(readers)};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < readers; ++r)
    threads.emplace_back([&, r] {
      for (;;) {
        std::vector<Handed> mine;
        {
          std::lock_guard<std::mutex> g(m);
          mine.swap(queues[size_t(r)]);
        }
        for (const Handed& h : mine) out[h.index] = h.value.sum().item<float>();
        if (mine.empty()) {
          if (done.load()) {
            std::lock_guard<std::mutex> g(m);
            if (queues[size_t(r)].empty()) break;
          }
          std::this_thread::yield();
        }
      }
    });
  {
    Engine eng(mode);
    for (int s = 0; s < steps; ++s) {
      auto st = eng.step();
      Tensor h = fc1(x);
      h = s % 3 == 1 ? F::relu(h) : (s == 20 ? F::sigmoid(h) : F::tanh(h));
      Tensor loss = F::cross_entropy(fc2(h), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      {
        std::lock_guard<std::mutex> g(m);
        queues[size_t(s % readers)].push_back({size_t(s) * 3, h});
        queues[size_t((s + 1) % readers)].push_back({size_t(s) * 3 + 1, loss});
      }
      if (use_handed) {
        NoGradGuard ng;
        acc = acc + loss.reshape({1});
        acc_h = acc_h + (h.slice(0, 1, 3) * 2.0f).sum({0});
      }
      if (s % 4 == 0) out[size_t(s) * 3 + 2] = loss.item<float>();
    }
    out[size_t(steps) * 3] = acc.item<float>();
    out[size_t(steps) * 3 + 1] = acc_h.sum().item<float>();
    done = true;
    for (auto& t : threads) t.join();
    eng.synchronize();
  }
  return out;
}

}  // namespace

TEST(ReadsOnOtherThreads, InsideStepsAcrossFallbacksMatchEager) {
  const int steps = 40;
  const int64_t before = runtime::StepState::live();
  const std::vector<float> eager = train(Mode::Eager, steps, 2);
  for (int round = 0; round < 3; ++round) {
    const std::vector<float> co = train(Mode::CoExecution, steps, 2);
    ASSERT_EQ(co.size(), eager.size());
    for (size_t i = 0; i < eager.size(); ++i) EXPECT_EQ(co[i], eager[i]) << "round " << round << " value " << i;
  }
  EXPECT_EQ(runtime::StepState::live(), before) << "a step's state outlived its engine";
}

TEST(ReadsOnOtherThreads, LazyMatchesEager) {
  const int steps = 24;
  const std::vector<float> eager = train(Mode::Eager, steps, 2);
  const std::vector<float> lazy = train(Mode::Lazy, steps, 2);
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_EQ(lazy[i], eager[i]) << "value " << i;
}

// The host passes each handed value on to its own ops (no copy) at the moment the readers first read
// it. Their read installs the value into the tensor whose placeholder the host's op is reading.
TEST(ReadsOnOtherThreads, ValuesUsedByTheHostWhileReadMatchEager) {
  const int steps = 40;
  const std::vector<float> eager = train(Mode::Eager, steps, 3, true);
  for (Mode mode : {Mode::CoExecution, Mode::Lazy})
    for (int round = 0; round < 3; ++round) {
      const std::vector<float> got = train(mode, steps, 3, true);
      ASSERT_EQ(got.size(), eager.size());
      for (size_t i = 0; i < eager.size(); ++i)
        EXPECT_EQ(got[i], eager[i]) << mode_name(mode) << " round " << round << " value " << i;
    }
}

// Two lazy engines on two threads, each handing the other a value it still owes and then reading a
// sum of both at about the same moment, so each barrier needs the other engine's value. A barrier
// once computed the other engine's value under its own engine's lock, while the other barrier held
// its lock and waited for this one's: the two threads hung.
TEST(ReadsOnOtherThreads, TwoLazyEnginesReadingEachOthersValuesNeitherWaitsForever) {
  const int rounds = 100;
  std::barrier sync(2);
  Tensor handed[2];
  std::vector<float> got[2];
  auto thread = [&](int me) {
    Engine eng(Mode::Lazy);
    Tensor x = full({1 << 19}, float(me + 1));  // barriers long enough to overlap
    for (int r = 0; r < rounds; ++r) {
      auto st = eng.step();
      Tensor mine = x * float(r) + 1.0f;  // owed by this engine
      EXPECT_TRUE(mine.impl()->awaiting.load());
      handed[me] = mine;
      sync.arrive_and_wait();
      Tensor theirs = handed[1 - me];  // owed by the other engine
      sync.arrive_and_wait();          // both taken before either is replaced
      got[me].push_back((mine + theirs).slice(0, 0, 4).sum().item<float>());
    }
  };
  std::thread other(thread, 1);
  thread(0);
  other.join();
  for (int me = 0; me < 2; ++me) {
    ASSERT_EQ(got[me].size(), size_t(rounds));
    for (int r = 0; r < rounds; ++r) EXPECT_EQ(got[me][size_t(r)], 4.0f * float(3 * r + 2)) << "thread " << me << " round " << r;
  }
}
