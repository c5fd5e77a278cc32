// How many threads terra's CPU kernels use: one process-wide decision that every kernel reads
// (terra's intra-op pool and the oneDNN calls it splits). See README "Threads".
#pragma once
#include <atomic>
#include <cstdint>

namespace terra {

// Threads a kernel may use, the calling thread included. n < 1 throws std::invalid_argument.
// Takes effect at the next kernel; the pool resizes lazily.
void set_num_threads(int n);
// The current count. Until set_num_threads is called: OMP_NUM_THREADS when it holds a positive
// integer (its first entry), else the CPUs this process may run on (sched_getaffinity).
int num_threads();
// torch's name for num_threads().
inline int get_num_threads() { return num_threads(); }

// Pool workers a loop started on this thread may take now: num_threads() - 1, or one fewer while
// this thread leaves a core to a busy host (below).
int loop_helpers();
// Called on a co-executed program's GraphRunner thread: while `*host_waiting` is 0 the host thread
// is running the user's program on a core of its own, and the runner's loops take one worker fewer
// (none on 2 threads: the chunks run on the runner, the same partition, so the same results); a
// worker woken there would only take the core from the host. While it is positive (the host is
// blocked on the runner) loops take every worker. nullptr lifts the limit.
void leave_core_to_host(const std::atomic<int>* host_waiting);

// Where terra's own threads run (README "Threads"). On by default: pool worker k runs on the k-th
// CPU this process may use, and a GraphRunner on the CPUs no worker takes, so the runner and the
// workers its loops wake never share a core (left to the scheduler, they often do: measured on 2
// cores, co-execution's steps/s then varies by 1.7x from one process to the next). Threads of the
// user's program are never moved. Placement needs more CPUs than workers; otherwise nothing is
// pinned. Takes effect for threads started afterwards (the pool's workers start at its next resize).
void set_thread_affinity(bool on);
bool thread_affinity();
// Called by a thread as it starts: pool worker `k` (0-based; returns the placement generation it
// applied, for refresh_worker_placement), or a GraphRunner.
uint32_t place_worker_thread(int k);
void place_runner_thread();

// A co-executing host that runs kernels itself (it traces a step: a fallback, a new path) while its
// GraphRunner sleeps: pool workers give up their CPUs until every such host co-executes again.
// Pinned apart from the runner, the only worker of a 2-CPU machine shares a core with the host
// (the scheduler put the host beside it while the runner held the other core), and the host's
// kernels then ran at half speed; unpinned, the worker wakes on the idle core. Counted per call:
// each unpin_workers(true) is undone by one unpin_workers(false).
void unpin_workers(bool on);
// Pool worker `k` applies its placement again when `seen` (the generation it last applied) lags
// behind: it was unpinned or pinned again since.
void refresh_worker_placement(int k, uint32_t& seen);

}  // namespace terra
