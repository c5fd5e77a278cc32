// terra's intra-op thread pool. One loop at a time runs on it; the calling thread takes part.
// Work is cut into a fixed partition (chunks depend only on n, grain and num_threads()), and
// chunks are claimed from an atomic counter, so results never depend on which thread ran what
// and a descheduled worker never stalls the caller: the caller simply runs the chunks left.
// Workers poll ~20 µs after a loop, then sleep on a futex: no long spinning between ops.
#pragma once
#include <cstdint>
#include <memory>

namespace terra::cpu {

// The fixed partition of [0, n): `count` chunks of `size` elements (the last may be shorter).
struct Partition {
  int64_t count, size;
};
// One chunk when n < grain or threads == 1; else between `threads` and 4 * threads chunks, each
// at least grain / 4 long where n allows.
Partition partition(int64_t n, int64_t grain, int threads);

// Type-erased chunk body: fn(ctx, begin, end).
using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);

// Runs fn over the chunks of `p` (covering [0, n)) on the pool and the calling thread; returns
// once every chunk has run, rethrowing the exception of the lowest chunk that threw (the one a
// serial loop would raise; chunks after it may be skipped). At most loop_helpers() workers
// (core/threads.h) join. Returns false without running anything when no worker may join, the pool
// is busy (another thread's loop) or the caller is itself inside a pool loop (nesting): the caller
// then runs the loop serially.
bool pool_run(int64_t n, Partition p, ChunkFn fn, void* ctx);

// One task handed to a pool worker while the caller goes on (fork/join). pool_fork runs
// fn(ctx, 0, 1) on a worker, or right there when no worker may take it (loop_helpers() < 1, the
// pool busy, or the caller inside a loop). While a task is out the pool is busy, so loops started
// meanwhile (on any thread) run serially, and a worker runs the task's own loops serially: the
// same fixed partitions, so the same results. join() waits for it, running it on the caller if no
// worker has claimed it yet, and rethrows its exception; the destructor joins too (an error is
// then dropped: call join() to see it).
class ForkedTask {
 public:
  ForkedTask() = default;
  ForkedTask(ForkedTask&&) = default;
  ForkedTask& operator=(ForkedTask&&) = delete;
  ~ForkedTask();
  void join();

 private:
  friend ForkedTask pool_fork(ChunkFn fn, void* ctx);
  std::shared_ptr<struct Job> job_;
};
ForkedTask pool_fork(ChunkFn fn, void* ctx);

// True on pool workers and on a caller while it runs chunks.
bool in_parallel_region();

// A thread that waits for another one lends its core meanwhile (the co-execution host blocked on
// its GraphRunner): until done(ctx) holds or `budget_us` microseconds passed, it runs chunks and
// forked tasks of the loops published while it helps, as a worker would. A loop started while a
// guest helps takes the guest in place of a sleeping worker (no wake-up; the guest's core is the
// idle one). Returns done(ctx)'s last value. The caller makes its thread fit to run kernels (no
// executor of its own installed, no autograd recording): runtime::lend_core_while does.
// A chunk the guest claimed runs to its end, so done() may hold a chunk's length before it returns.
bool pool_help(bool (*done)(void* ctx), void* ctx, int64_t budget_us);
// True while a guest helps (above): a loop started now gets a helper that is already awake, so
// loops whose values do not depend on their partition may cut finer chunks (finer_grain).
bool pool_guest_ready();

}  // namespace terra::cpu
