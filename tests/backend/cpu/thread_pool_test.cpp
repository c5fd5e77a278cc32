// terra's intra-op pool: coverage, the fixed partition, concurrency, nesting and errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "terra/backend/cpu/parallel.h"
#include "terra/core/threads.h"

namespace terra::cpu {
namespace {

// Restores the process-wide thread count when a test ends.
struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

TEST(ThreadPool, PartitionDependsOnlyOnItsArguments) {
  EXPECT_EQ(partition(10, 32768, 4).count, 1);  // below the grain: one chunk
  EXPECT_EQ(partition(100000, 1000, 1).count, 1);
  Partition p = partition(100000, 32768, 2);  // 12 quarter grains, capped at 4 chunks per thread
  EXPECT_EQ(p.count, 8);
  EXPECT_EQ(p.size, 12500);
  p = partition(40000, 32768, 2);  // 4 quarter grains
  EXPECT_EQ(p.count, 4);
  EXPECT_EQ(p.size, 10000);
  p = partition(40000, 32768, 8);  // at least one chunk per thread
  EXPECT_EQ(p.count, 8);
  EXPECT_EQ(p.size, 5000);
  p = partition(1 << 20, 32768, 2);
  EXPECT_EQ(p.count, 8);
  EXPECT_EQ(p.size, 131072);
  p = partition(3, 1, 8);  // never more chunks than elements
  EXPECT_EQ(p.count, 3);
  EXPECT_EQ(p.size, 1);
}

TEST(ThreadPool, CoversEveryIndexExactlyOnceInThePartitionsRanges) {
  ThreadsGuard g;
  for (int t : {1, 2, 3, 4, 7}) {
    set_num_threads(t);
    for (int64_t n : {0, 1, 5, 31, 1000, 32768, 32769, 100003, 300000})
      for (int64_t grain : {1, 7, 1000, 32768}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::mutex mu;
        std::set<std::pair<int64_t, int64_t>> ranges;
        parallel_for(n, grain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
          std::lock_guard<std::mutex> lock(mu);
          ranges.insert({b, e});
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "t=" << t << " n=" << n << " i=" << i;
        if (n == 0) continue;
        // The ranges are exactly the partition's, whichever thread ran them.
        std::set<std::pair<int64_t, int64_t>> want;
        if (n < grain) {
          want.insert({0, n});
        } else {
          Partition p = partition(n, grain, t);
          for (int64_t c = 0; c < p.count; ++c) want.insert({c * p.size, std::min(n, (c + 1) * p.size)});
        }
        ASSERT_EQ(ranges, want) << "t=" << t << " n=" << n << " grain=" << grain;
      }
  }
}

// Whether a 2-chunk loop ran on two threads at once: its chunks wait for each other, so both
// arrive only if a worker took one (up to 50 attempts).
bool two_threads_ran_a_loop() {
  std::atomic<int> arrived{0};
  std::atomic<bool> both{false};
  for (int attempt = 0; attempt < 50 && !both; ++attempt) {
    arrived = 0;
    parallel_for(2, 1, [&](int64_t, int64_t) {
      arrived.fetch_add(1);
      for (int i = 0; i < 200000 && arrived.load() < 2; ++i) std::this_thread::yield();
      if (arrived.load() == 2) both = true;
    });
  }
  return both.load();
}

TEST(ThreadPool, UsesAWorkerWhenOneIsFree) {
  ThreadsGuard g;
  set_num_threads(2);
  EXPECT_TRUE(two_threads_ran_a_loop());
}

// A GraphRunner leaves the host its core while the host is busy: its loops then take no worker
// on 2 threads, one worker fewer on more, and every worker again while the host waits for it.
TEST(ThreadPool, LeavesACoreToABusyHost) {
  ThreadsGuard g;
  std::atomic<int> host_waiting{0};
  struct Lift {
    ~Lift() { leave_core_to_host(nullptr); }
  } lift;
  leave_core_to_host(&host_waiting);
  set_num_threads(2);
  EXPECT_EQ(loop_helpers(), 0);
  const std::thread::id me = std::this_thread::get_id();
  std::mutex mu;
  std::set<std::thread::id> ran;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  parallel_for(100000, 1000, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> l(mu);
    ran.insert(std::this_thread::get_id());
    ranges.push_back({b, e});
  });
  EXPECT_EQ(ran, std::set<std::thread::id>{me});
  // The partition of two threads, run in order on this one: the same ranges, so the same results.
  Partition p = partition(100000, 1000, 2);
  ASSERT_EQ(int64_t(ranges.size()), p.count);
  for (int64_t c = 0; c < p.count; ++c) EXPECT_EQ(ranges[size_t(c)].first, c * p.size);
  set_num_threads(4);
  EXPECT_EQ(loop_helpers(), 2);
  host_waiting = 1;
  EXPECT_EQ(loop_helpers(), 3);
  set_num_threads(2);
  EXPECT_EQ(loop_helpers(), 1);
  // With the host waiting, a worker joins again.
  EXPECT_TRUE(two_threads_ran_a_loop());
  leave_core_to_host(nullptr);
  host_waiting = 0;
  EXPECT_EQ(loop_helpers(), 1);
}

// A thread that waits lends its core (pool_help): a loop started while it helps runs chunks on
// it instead of a worker, and the helper returns once its condition holds.
TEST(ThreadPool, AWaitingThreadHelpsInsteadOfAWorker) {
  ThreadsGuard g;
  set_num_threads(2);
  std::atomic<bool> stop{false};
  std::atomic<bool> helping{false};
  std::thread::id guest_id;
  bool returned_ready = false;
  std::thread guest([&] {
    guest_id = std::this_thread::get_id();
    helping = true;
    auto done = [](void* c) { return static_cast<std::atomic<bool>*>(c)->load(); };
    returned_ready = pool_help(done, &stop, 10'000'000);  // 10 s: returns on `stop` long before
  });
  while (!helping.load() || !pool_guest_ready()) std::this_thread::yield();
  EXPECT_EQ(finer_grain(32768), 4096);  // a guest is awake: loops may cut finer chunks
  // The loop's two chunks wait for each other: both arrive only if the guest took one.
  std::mutex mu;
  std::set<std::thread::id> ran;
  std::atomic<int> arrived{0};
  parallel_for(2, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> l(mu);
      ran.insert(std::this_thread::get_id());
    }
    arrived.fetch_add(1);
    for (int i = 0; i < 2'000'000 && arrived.load() < 2; ++i) std::this_thread::yield();
  });
  EXPECT_EQ(arrived.load(), 2);
  stop = true;
  guest.join();
  EXPECT_TRUE(returned_ready);
  EXPECT_TRUE(ran.count(guest_id)) << "the guest ran no chunk";
  EXPECT_EQ(ran.size(), 2u);  // the caller and the guest: no worker was woken beside the guest
  EXPECT_FALSE(pool_guest_ready());
  EXPECT_EQ(finer_grain(32768), 32768);
}

// A guest whose condition never holds gives up after its budget; with nothing published it only
// waits. Inside a pool loop a thread is never a guest (it returns at once).
TEST(ThreadPool, AGuestReturnsAfterItsBudget) {
  ThreadsGuard g;
  set_num_threads(2);
  auto never = [](void*) { return false; };
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(pool_help(never, nullptr, 2000));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::microseconds(2000));
  // Chunks of a loop run with the pool's nesting mark, on a worker or on the caller.
  std::atomic<int> nested_true{0};
  t0 = std::chrono::steady_clock::now();
  parallel_for(2, 1, [&](int64_t, int64_t) { nested_true += pool_help(never, nullptr, 10'000'000); });
  EXPECT_EQ(nested_true.load(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_FALSE(pool_guest_ready());
}

// A guest takes a forked task too, and the task's error reaches its joiner.
TEST(ThreadPool, AGuestRunsAForkedTaskAndItsErrorReachesTheJoiner) {
  ThreadsGuard g;
  set_num_threads(2);
  std::atomic<bool> stop{false}, helping{false};
  std::thread::id guest_id, ran_on;
  std::thread guest([&] {
    guest_id = std::this_thread::get_id();
    helping = true;
    pool_help([](void* c) { return static_cast<std::atomic<bool>*>(c)->load(); }, &stop, 10'000'000);
  });
  while (!helping.load() || !pool_guest_ready()) std::this_thread::yield();
  struct Ctx {
    std::thread::id* ran_on;
    std::atomic<bool> claimed{false};
  } ctx{&ran_on};
  auto task = [](void* c, int64_t, int64_t) {
    auto& x = *static_cast<Ctx*>(c);
    *x.ran_on = std::this_thread::get_id();
    x.claimed = true;
    throw std::runtime_error("task failed");
  };
  ForkedTask t = pool_fork(task, &ctx);
  for (int i = 0; i < 2'000'000 && !ctx.claimed.load(); ++i) std::this_thread::yield();
  EXPECT_THROW(t.join(), std::runtime_error);
  stop = true;
  guest.join();
  EXPECT_EQ(ran_on, guest_id);
}

TEST(ThreadPool, ConcurrentCallersEachGetEveryIndex) {
  ThreadsGuard g;
  set_num_threads(2);
  auto run = [](std::vector<int64_t>& out) {
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<int64_t> v(50000, 0);
      parallel_for(int64_t(v.size()), 1000, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) v[size_t(i)] += i * 3 + rep;
      });
      int64_t s = 0;
      for (int64_t x : v) s += x;
      out.push_back(s);
    }
  };
  std::vector<int64_t> a, b;
  std::thread other([&] { run(b); });
  run(a);
  other.join();
  ASSERT_EQ(a.size(), 200u);
  ASSERT_EQ(a, b);
  const int64_t n = 50000;
  for (int rep = 0; rep < 200; ++rep) EXPECT_EQ(a[size_t(rep)], 3 * n * (n - 1) / 2 + rep * n);
}

TEST(ThreadPool, NestedLoopsRunSeriallyInsideAChunk) {
  ThreadsGuard g;
  set_num_threads(3);
  const int64_t outer = 12, inner = 5000;
  std::vector<std::atomic<int>> hits(static_cast<size_t>(outer * inner));
  parallel_for(outer, 1, [&](int64_t b, int64_t e) {
    EXPECT_TRUE(in_parallel_region());
    for (int64_t o = b; o < e; ++o)
      parallel_for(inner, 100, [&](int64_t ib, int64_t ie) {
        for (int64_t i = ib; i < ie; ++i) hits[size_t(o * inner + i)].fetch_add(1);
      });
  });
  EXPECT_FALSE(in_parallel_region());
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, RethrowsTheChunksExceptionOnTheCaller) {
  ThreadsGuard g;
  for (int t : {1, 2, 4}) {
    set_num_threads(t);
    EXPECT_THROW(parallel_for(100000, 1000,
                              [&](int64_t b, int64_t e) {
                                if (b <= 77777 && 77777 < e) throw std::out_of_range("chunk failed");
                              }),
                 std::out_of_range);
    // The pool is usable afterwards.
    std::atomic<int64_t> sum{0};
    parallel_for(100000, 1000, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
    EXPECT_EQ(sum.load(), 100000);
  }
}

TEST(ThreadPool, ResizesWhenTheThreadCountChanges) {
  ThreadsGuard g;
  for (int t : {4, 2, 3, 1, 2}) {
    set_num_threads(t);
    std::atomic<int64_t> sum{0};
    parallel_for(200000, 1000, [&](int64_t b, int64_t e) {
      int64_t s = 0;
      for (int64_t i = b; i < e; ++i) s += i;
      sum.fetch_add(s);
    });
    EXPECT_EQ(sum.load(), int64_t(200000) * 199999 / 2) << t;
  }
}

// A forked child (Python multiprocessing, say) has none of the parent's workers: its loops still
// cover every index, and the pool can be resized there.
TEST(ThreadPool, WorksInAForkedChild) {
  ThreadsGuard g;
  set_num_threads(2);
  auto sum_to = [](int64_t n) {
    std::atomic<int64_t> sum{0};
    parallel_for(n, 1000, [&](int64_t b, int64_t e) {
      int64_t s = 0;
      for (int64_t i = b; i < e; ++i) s += i;
      sum.fetch_add(s);
    });
    return sum.load();
  };
  ASSERT_EQ(sum_to(100000), int64_t(100000) * 99999 / 2);  // the parent's workers exist
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    bool ok = sum_to(100000) == int64_t(100000) * 99999 / 2;
    set_num_threads(3);
    ok = ok && sum_to(300000) == int64_t(300000) * 299999 / 2;
    set_num_threads(1);
    ok = ok && sum_to(300000) == int64_t(300000) * 299999 / 2;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace terra::cpu
