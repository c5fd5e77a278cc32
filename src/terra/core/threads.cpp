#include "terra/core/threads.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace terra {
namespace {

// 0: not decided yet (the default is computed on first read, so a user's setenv before the first
// kernel still counts).
std::atomic<int> g_threads{0};

// The CPUs the process may use, in order, read once: for the default thread count and for thread
// placement (threads inherit their creator's mask, and none is pinned before this is first read).
// Never destroyed: the pool's threads are never joined, and one starting while the process exits
// would read a vector the exit handlers had already freed.
const std::vector<int>& allowed_cpus() {
  static const std::vector<int>* cpus = [] {
    auto* v = new std::vector<int>;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) v->push_back(c);
    return v;
  }();
  return *cpus;
}

int default_threads() {
  // OMP_NUM_THREADS may be a list ("4,2" for nested levels): its first entry is terra's count.
  if (const char* s = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(s, &end, 10);
    if (end != s && v >= 1 && v <= 4096) return int(v);
  }
  if (!allowed_cpus().empty()) return int(allowed_cpus().size());
  unsigned h = std::thread::hardware_concurrency();
  return h ? int(h) : 1;
}

}  // namespace

void set_num_threads(int n) {
  if (n < 1)
    throw std::invalid_argument("[set_num_threads] the thread count must be at least 1, got " + std::to_string(n));
  g_threads.store(n, std::memory_order_relaxed);
}

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n > 0) return n;
  int d = default_threads();
  int expected = 0;
  // A concurrent set_num_threads wins over the default.
  if (!g_threads.compare_exchange_strong(expected, d, std::memory_order_relaxed)) return expected;
  return d;
}

namespace {
thread_local const std::atomic<int>* t_host_waiting = nullptr;
}  // namespace

int loop_helpers() {
  const int all = num_threads() - 1;
  return t_host_waiting && t_host_waiting->load(std::memory_order_relaxed) == 0 ? all - 1 : all;
}

void leave_core_to_host(const std::atomic<int>* host_waiting) { t_host_waiting = host_waiting; }

namespace {
std::atomic<bool> g_affinity{true};
std::atomic<int> g_unpinned{0};            // hosts running kernels beside a sleeping runner
std::atomic<uint32_t> g_placement_gen{0};  // bumped at each change of g_unpinned

// Workers the pool has at the current thread count: one CPU each while more CPUs than that remain.
int placed_workers() {
  const int workers = num_threads() - 1;
  return workers >= 1 && workers < int(allowed_cpus().size()) ? workers : 0;
}

void pin(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // a failure leaves the thread where it was
}
}  // namespace

void set_thread_affinity(bool on) { g_affinity.store(on, std::memory_order_relaxed); }
bool thread_affinity() { return g_affinity.load(std::memory_order_relaxed); }

// Unplaced threads get every allowed CPU: one started from a pinned runner (a pool resize there)
// would otherwise keep the runner's CPUs.
uint32_t place_worker_thread(int k) {
  const uint32_t gen = g_placement_gen.load(std::memory_order_acquire);
  const std::vector<int>& cpus = allowed_cpus();
  if (!thread_affinity() || k < 0 || k >= placed_workers() || g_unpinned.load(std::memory_order_relaxed) > 0) pin(cpus);
  else pin({cpus[size_t(k)]});
  return gen;
}

void unpin_workers(bool on) {
  g_unpinned.fetch_add(on ? 1 : -1, std::memory_order_relaxed);
  g_placement_gen.fetch_add(1, std::memory_order_release);
}

void refresh_worker_placement(int k, uint32_t& seen) {
  if (g_placement_gen.load(std::memory_order_acquire) != seen) seen = place_worker_thread(k);
}

void place_runner_thread() {
  const std::vector<int>& cpus = allowed_cpus();
  const int workers = placed_workers();
  if (!thread_affinity() || workers == 0) pin(cpus);
  else pin(std::vector<int>(cpus.begin() + workers, cpus.end()));
}

}  // namespace terra
