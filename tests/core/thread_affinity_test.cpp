// Thread placement (core/threads.h): pool workers on one CPU each, GraphRunners on the CPUs no
// worker takes, the user's threads never moved; switched off, nothing is pinned. While a
// co-executing host runs kernels itself, workers give up their CPUs.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include <terra/terra.h>

#include "terra/backend/cpu/parallel.h"
#include "terra/core/threads.h"

namespace terra {
namespace {

std::vector<int> my_cpus() {
  std::vector<int> v;
  cpu_set_t set;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) v.push_back(c);
  return v;
}

struct Restore {
  int threads = num_threads();
  bool affinity = thread_affinity();
  ~Restore() {
    set_thread_affinity(affinity);
    set_num_threads(threads);
    cpu::parallel_for(2, 1, [](int64_t, int64_t) {});  // the pool back at its old size
  }
};

// The CPU sets of the threads other than this one that ran chunks of a 2-thread loop: a running
// worker's, as it stands at its next loop.
std::vector<std::vector<int>> running_worker_cpus() {
  const std::thread::id me = std::this_thread::get_id();
  std::mutex mu;
  std::vector<std::vector<int>> seen;
  for (int round = 0; round < 50 && seen.empty(); ++round) {
    std::atomic<int> arrived{0};
    cpu::parallel_for(2, 1, [&](int64_t, int64_t) {
      arrived.fetch_add(1);  // both chunks wait a little for each other: the worker takes one
      for (int i = 0; i < 200000 && arrived.load() < 2; ++i) std::this_thread::yield();
      if (std::this_thread::get_id() == me) return;
      std::lock_guard<std::mutex> g(mu);
      seen.push_back(my_cpus());
    });
  }
  return seen;
}

// The first of those sets, or none when the worker never took a chunk.
std::vector<int> running_worker_cpu_set() {
  std::vector<std::vector<int>> w = running_worker_cpus();
  return w.empty() ? std::vector<int>{} : w[0];
}

// As running_worker_cpus, after shrinking the pool from 2 workers to 1: a resize restarts its
// workers, under the current setting.
std::vector<std::vector<int>> worker_cpus() {
  set_num_threads(3);
  cpu::parallel_for(3, 1, [](int64_t, int64_t) {});
  set_num_threads(2);
  return running_worker_cpus();
}

std::vector<int> runner_cpus() {
  std::vector<int> cpus;
  std::thread([&] {
    place_runner_thread();
    cpus = my_cpus();
  }).join();
  return cpus;
}

TEST(ThreadAffinity, WorkersOnOneCpuEachRunnersOnTheOthers) {
  const std::vector<int> all = my_cpus();
  if (all.size() < 2) GTEST_SKIP() << "placement needs 2 CPUs, this process may use " << all.size();
  Restore r;
  set_thread_affinity(true);
  std::vector<std::vector<int>> w = worker_cpus();
  ASSERT_FALSE(w.empty()) << "the worker never took a chunk";
  EXPECT_EQ(w[0], std::vector<int>{all[0]});
  EXPECT_EQ(runner_cpus(), std::vector<int>(all.begin() + 1, all.end()));
  EXPECT_EQ(my_cpus(), all);  // the calling (user's) thread is left alone
}

// A co-executing host that runs kernels itself (CoExecSession::host_runs_kernels) unpins the
// workers; they take their own CPU again once every such host is back.
TEST(ThreadAffinity, WorkersGiveUpTheirCpuWhileAHostRunsKernels) {
  const std::vector<int> all = my_cpus();
  if (all.size() < 2) GTEST_SKIP() << "placement needs 2 CPUs, this process may use " << all.size();
  Restore r;
  set_thread_affinity(true);
  std::vector<std::vector<int>> w = worker_cpus();
  ASSERT_FALSE(w.empty()) << "the worker never took a chunk";
  ASSERT_EQ(w[0], std::vector<int>{all[0]});
  unpin_workers(true);
  unpin_workers(true);  // two hosts tracing at once
  EXPECT_EQ(running_worker_cpu_set(), all);
  unpin_workers(false);  // one of them co-executes again: the other still runs kernels
  EXPECT_EQ(running_worker_cpu_set(), all);
  unpin_workers(false);
  EXPECT_EQ(running_worker_cpu_set(), std::vector<int>{all[0]});
  EXPECT_EQ(my_cpus(), all);
}

// In a program: while its host traces (the first step, a fallback's rest), a co-execution
// engine's workers are unpinned; while it co-executes, the worker is on its own CPU.
TEST(ThreadAffinity, CoExecutionUnpinsWorkersOnlyWhileTheHostTraces) {
  const std::vector<int> all = my_cpus();
  if (all.size() < 2) GTEST_SKIP() << "placement needs 2 CPUs, this process may use " << all.size();
  Restore r;
  set_thread_affinity(true);
  ASSERT_FALSE(worker_cpus().empty());  // the pool restarted with 1 worker, pinned
  const std::vector<int> pinned{all[0]};
  Tensor a = full({4}, 1.5f);
  std::vector<std::vector<int>> traced, coexec, fell_back;
  std::vector<float> losses;
  {
    Engine engine(Mode::CoExecution);
    for (int it = 0; it < 4; ++it) {
      auto step = engine.step();
      Tensor y = (a + 1.0f) * 2.0f;
      if (it == 3) y = y - 0.5f;  // a new path: the host falls back here and traces the rest
      (it == 0 ? traced : it == 3 ? fell_back : coexec).push_back(running_worker_cpu_set());
      losses.push_back(y.sum().item<float>());
    }
    EXPECT_EQ(engine.stats().fallbacks, 1);
  }
  EXPECT_EQ(traced[0], all);
  for (const auto& c : coexec) EXPECT_EQ(c, pinned);
  EXPECT_EQ(fell_back[0], all);
  EXPECT_EQ(running_worker_cpu_set(), pinned);  // the engine is gone: the worker takes its CPU again
  EXPECT_EQ(losses, (std::vector<float>{20.0f, 20.0f, 20.0f, 18.0f}));
}

TEST(ThreadAffinity, OffPinsNothing) {
  const std::vector<int> all = my_cpus();
  Restore r;
  set_thread_affinity(false);
  std::vector<std::vector<int>> w = worker_cpus();
  if (all.size() >= 2) {
    ASSERT_FALSE(w.empty()) << "the worker never took a chunk";
    EXPECT_EQ(w[0], all);
  }
  EXPECT_EQ(runner_cpus(), all);
}

// Off, a thread terra starts from one of its pinned threads gets every CPU back, not its creator's.
TEST(ThreadAffinity, OffUnpinsThreadsStartedFromAPinnedOne) {
  const std::vector<int> all = my_cpus();
  if (all.size() < 2) GTEST_SKIP() << "placement needs 2 CPUs, this process may use " << all.size();
  Restore r;
  set_thread_affinity(true);
  set_num_threads(2);
  std::vector<int> inner;
  std::thread([&] {
    place_runner_thread();  // pinned to all but the worker's CPU
    set_thread_affinity(false);
    std::thread([&] {
      place_worker_thread(0);
      inner = my_cpus();
    }).join();
  }).join();
  EXPECT_EQ(inner, all);
}

TEST(ThreadAffinity, NothingPinnedWhenWorkersWouldFillEveryCpu) {
  const std::vector<int> all = my_cpus();
  Restore r;
  set_thread_affinity(true);
  set_num_threads(int(all.size()) + 1);  // as many workers as CPUs: no CPU left for a runner
  EXPECT_EQ(runner_cpus(), all);
}

}  // namespace
}  // namespace terra
