#include "terra/backend/cpu/thread_pool.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "terra/core/float_env.h"
#include "terra/core/object_pool.h"
#include "terra/core/threads.h"
#include "terra/core/wait.h"

namespace terra::cpu {
namespace {

// How long an idle thread polls before sleeping: long enough to catch the next op of a training
// step (a few µs of dispatch apart), short enough not to steal the core from the other thread.
// Measured on 2 cores, 4-layer MLP batch 16 Adam (bench/mlp_modes), steps/s eager / coexec:
// 0 µs 400-490 / 360-400, 5 µs 560-600 / 440-490, 20 µs 830-910 / 690-740, 200 µs 1060-1110 / 480-540.
constexpr auto kSpin = std::chrono::microseconds(20);


// Polls until word != value for about kSpin; then sleeps on the futex until it changes.
// `sleepers` counts threads that may be asleep, so a waker skips the syscall when none are.
void await_change(std::atomic<uint32_t>& word, uint32_t value, std::atomic<int>& sleepers) {
  auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (word.load(std::memory_order_acquire) != value) return;
    _mm_pause();
    if ((i & 15) == 15 && std::chrono::steady_clock::now() > until) break;
  }
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  while (word.load(std::memory_order_seq_cst) == value) futex_wait(word, value);
  sleepers.fetch_sub(1, std::memory_order_relaxed);
}

void wake_all(std::atomic<uint32_t>& word, std::atomic<int>& sleepers) {
  if (sleepers.load(std::memory_order_seq_cst) > 0) futex_wake(word, INT32_MAX);
}

thread_local bool t_in_parallel = false;

// Threads inside pool_help. Outside the Pool: pool_guest_ready() reads it from any thread, and
// must not race with the pool's lazy creation.
std::atomic<int> g_guests{0};

void pool_in_child();

}  // namespace

// One loop. Shared by reference count: a worker that picks it up late keeps it alive, finds no
// chunk left and never touches the caller's (by then gone) closure.
struct Job {
  int64_t n = 0;
  Partition p{};
  ChunkFn fn = nullptr;
  void* ctx = nullptr;
  std::atomic<int64_t> next{0}, done{0};
  std::atomic<uint32_t> finished{0};
  std::atomic<int> caller_sleeping{0};
  // Workers that may still join (the gate's limit); a worker past it leaves the chunks to others.
  std::atomic<int> seats{INT32_MAX};
  std::atomic<int> guest_seats{0};  // the same, for guests (pool_help)
  // The lowest chunk that threw, and its exception: the error a serial loop would have raised
  // first, whatever the timing. Chunks after it are skipped; chunks before it still run.
  std::atomic<int64_t> failed_chunk{INT64_MAX};
  std::mutex error_mu;
  std::exception_ptr error;

  // Claims and runs chunks until none are left.
  void work() {
    KernelFloatEnv fe;  // a guest (a user's thread lending its core) gets its own back after
    for (;;) {
      int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= p.count) return;
      if (c < failed_chunk.load(std::memory_order_relaxed)) {
        try {
          fn(ctx, c * p.size, std::min(n, (c + 1) * p.size));
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (c < failed_chunk.load(std::memory_order_relaxed)) {
            failed_chunk.store(c, std::memory_order_relaxed);
            error = std::current_exception();
          }
        }
      }
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == p.count) {
        finished.store(1, std::memory_order_seq_cst);
        wake_all(finished, caller_sleeping);
      }
    }
  }
};

namespace {

class Pool {
 public:
  Pool() {
    // A forked child has none of the workers: forget them (never join) and start afresh.
    pthread_atfork(nullptr, nullptr, [] { pool_in_child(); });
  }

  // In a forked child: the parent's workers do not exist there.
  void forget_workers() {
    new std::vector<std::thread>(std::move(threads_));  // leaked: joining or destroying would abort
    threads_.clear();
    new (&mu_) std::mutex();  // a worker may have held it at the fork
    current_.reset();
    sleepers_.store(0);
    g_guests.store(0);
    t_in_parallel = false;
    stop_.store(false);
    busy_.store(false);
  }

  bool run(int64_t n, Partition p, ChunkFn fn, void* ctx) {
    std::shared_ptr<Job> job = start(n, p, fn, ctx);
    if (!job) return false;
    t_in_parallel = true;
    job->work();
    t_in_parallel = false;
    finish(*job);
    return true;
  }

  // One task for a worker; the caller goes on and later calls finish (via join).
  std::shared_ptr<Job> fork(ChunkFn fn, void* ctx) { return start(1, Partition{1, 1}, fn, ctx); }

  // Runs the chunks no worker claimed, waits for the rest, frees the pool; rethrows the job's error.
  void join(Job& job) {
    t_in_parallel = true;
    job.work();
    t_in_parallel = false;
    finish(job);
  }

 private:
  // Publishes a job to the workers, or returns null (the caller runs it serially) when no worker
  // may join, the pool is busy (another thread's loop or fork) or the caller is inside a loop.
  std::shared_ptr<Job> start(int64_t n, Partition p, ChunkFn fn, void* ctx) {
    const int seats = loop_helpers();
    if (seats <= 0 || t_in_parallel || busy_.exchange(true, std::memory_order_acquire)) return nullptr;
    auto job = make_pooled<Job>();  // one per parallel loop: from terra's pool, not malloc (a worker may free it)
    // Guests first: they are awake on a core of their own; a worker woken beside them would share
    // a core with one (workers are pinned, guests are not).
    const int guests = std::min(seats, g_guests.load(std::memory_order_seq_cst));
    job->seats.store(seats - guests, std::memory_order_relaxed);
    job->guest_seats.store(guests, std::memory_order_relaxed);
    job->n = n;
    job->p = p;
    job->fn = fn;
    job->ctx = ctx;
    try {
      resize(num_threads() - 1);
    } catch (...) {
      busy_.store(false, std::memory_order_release);
      return nullptr;  // could not start threads: run serially
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = job;
    }
    if (guests > 0) guest_epoch_.fetch_add(1, std::memory_order_seq_cst);
    if (seats > guests) {
      epoch_.fetch_add(1, std::memory_order_seq_cst);
      wake_all(epoch_, sleepers_);
    }
    return job;
  }

 public:
  bool help(bool (*done)(void*), void* ctx, int64_t budget_us) {
    if (t_in_parallel) return done(ctx);  // a worker or a loop's caller: never a guest as well
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(budget_us);
    g_guests.fetch_add(1, std::memory_order_seq_cst);
    // A job published before this guest counted has no seat for it: look from the next one on.
    uint32_t seen = guest_epoch_.load(std::memory_order_seq_cst);
    bool ok = false;
    for (int i = 1;; ++i) {
      if (done(ctx)) {
        ok = true;
        break;
      }
      const uint32_t e = guest_epoch_.load(std::memory_order_acquire);
      if (e != seen) {
        seen = e;
        std::shared_ptr<Job> job;
        {
          std::lock_guard<std::mutex> lock(mu_);
          job = current_;
        }
        if (job && job->guest_seats.fetch_sub(1, std::memory_order_relaxed) > 0) {
          t_in_parallel = true;  // loops inside a chunk run serially here, as on a worker
          job->work();
          t_in_parallel = false;
          continue;
        }
      }
      _mm_pause();
      if ((i & 63) == 0) {
        if (std::chrono::steady_clock::now() > until) break;
        sched_yield();  // anything else runnable here (another process) goes first
      }
    }
    g_guests.fetch_sub(1, std::memory_order_seq_cst);
    return ok;
  }

 private:
  void finish(Job& job) {
    if (job.done.load(std::memory_order_acquire) != job.p.count) await_change(job.finished, 0, job.caller_sleeping);
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_.reset();
    }
    busy_.store(false, std::memory_order_release);
    // Taken out of the job: a worker may still hold the job and drop it later, and the exception must
    // then die on this thread, not there (TSan cannot see libstdc++'s atomic count of it).
    if (job.error) std::rethrow_exception(std::exchange(job.error, nullptr));
  }

  // Called with busy_ held, so no loop is running.
  void resize(int workers) {
    workers = std::max(workers, 0);
    if (int(threads_.size()) == workers) return;
    if (int(threads_.size()) > workers) {
      stop_.store(true);
      epoch_.fetch_add(1, std::memory_order_seq_cst);
      futex_wake(epoch_, INT32_MAX);
      for (auto& t : threads_) t.join();
      threads_.clear();
      stop_.store(false);
    }
    // A thread starts from the epoch of its creation, not of its first run: it may be scheduled
    // after the next loop (or a stop) was announced.
    const uint32_t now = epoch_.load(std::memory_order_acquire);
    while (int(threads_.size()) < workers) {
      const int k = int(threads_.size());
      threads_.emplace_back([this, now, k] {
        // One CPU each, apart from the GraphRunners' (core/threads.h).
        const uint32_t placed = place_worker_thread(k);
        worker(now, k, placed);
      });
    }
  }

  void worker(uint32_t seen, int k, uint32_t placed) {
    t_in_parallel = true;  // loops inside a chunk run serially on this thread
    for (;;) {
      await_change(epoch_, seen, sleepers_);
      seen = epoch_.load(std::memory_order_acquire);
      if (stop_.load()) return;
      refresh_worker_placement(k, placed);
      std::shared_ptr<Job> job;
      {
        std::lock_guard<std::mutex> lock(mu_);
        job = current_;
      }
      if (job && job->seats.fetch_sub(1, std::memory_order_relaxed) > 0) {
        set_thread_float_env();  // for good: the job's scope then changes nothing
        job->work();
      }
    }
  }

  std::atomic<bool> busy_{false}, stop_{false};
  std::atomic<uint32_t> epoch_{0};
  std::atomic<uint32_t> guest_epoch_{0};     // bumped when a job has guest seats
  std::atomic<int> sleepers_{0};
  std::mutex mu_;
  std::shared_ptr<Job> current_;
  std::vector<std::thread> threads_;
};

Pool*& pool_ptr() {
  static Pool* p = nullptr;
  return p;
}

Pool& pool() {
  static Pool* p = pool_ptr() = new Pool;  // leaked: kernels may run during static destruction
  return *p;
}

void pool_in_child() {
  if (Pool* p = pool_ptr()) p->forget_workers();
}

}  // namespace

Partition partition(int64_t n, int64_t grain, int threads) {
  if (n <= 0) return {0, 1};
  grain = std::max<int64_t>(grain, 1);
  if (threads <= 1 || n < grain) return {1, n};
  // At least one chunk per thread; up to 4 per thread, a quarter grain each at the least, so the
  // caller can take over the chunks of a worker that is late or descheduled (measured on a loaded
  // 2-core machine: the MLP of bench/mlp_modes ran 5-40% faster than with grain-sized chunks).
  const int64_t quarter = std::max<int64_t>(grain / 4, 1);
  int64_t count = std::clamp<int64_t>(n / quarter, threads, 4 * int64_t(threads));
  count = std::min(count, n);
  int64_t size = (n + count - 1) / count;
  return {(n + size - 1) / size, size};
}

bool pool_run(int64_t n, Partition p, ChunkFn fn, void* ctx) { return pool().run(n, p, fn, ctx); }

ForkedTask pool_fork(ChunkFn fn, void* ctx) {
  ForkedTask t;
  t.job_ = pool().fork(fn, ctx);
  if (!t.job_) fn(ctx, 0, 1);  // no worker may take it: it runs here, now
  return t;
}

void ForkedTask::join() {
  if (!job_) return;
  std::shared_ptr<Job> job = std::move(job_);  // joined once, even if the task threw
  pool().join(*job);
}

ForkedTask::~ForkedTask() {
  if (!job_) return;
  try {  // a task never outlives its caller's frame; its error is lost only when join() was skipped
    pool().join(*std::exchange(job_, nullptr));
  } catch (...) {
  }
}

bool in_parallel_region() { return t_in_parallel; }

bool pool_help(bool (*done)(void*), void* ctx, int64_t budget_us) { return pool().help(done, ctx, budget_us); }

bool pool_guest_ready() { return g_guests.load(std::memory_order_relaxed) > 0; }

}  // namespace terra::cpu
