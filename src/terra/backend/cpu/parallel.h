// parallel_for: terra's loops split over its own thread pool (thread_pool.h), never OpenMP, so the
// thread count is terra::num_threads() whatever OMP_* variables say, and nothing spins between ops.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "terra/backend/cpu/thread_pool.h"
#include "terra/core/threads.h"

namespace terra::cpu {

// Elements below which a loop stays on the calling thread (waking a worker costs ~1-5 us).
constexpr int64_t kGrain = 32768;

// The grain of a loop whose values do not depend on its partition (elementwise maps, rows of a
// normalization, parameters of an update): an eighth of `grain` while a guest helps the pool
// (pool_guest_ready: a helper already awake on an idle core costs no wake-up), else `grain`.
inline int64_t finer_grain(int64_t grain) { return pool_guest_ready() ? std::max<int64_t>(grain / 8, 1) : grain; }

// Calls f(begin, end) over disjoint ranges covering [0, n). The ranges are a fixed function of
// (n, grain, num_threads()); f must not depend on which thread runs a range.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (n < grain) {
    f(int64_t(0), n);
    return;
  }
  Partition p = partition(n, grain, num_threads());
  using Fn = std::remove_reference_t<F>;
  auto body = [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); };
  if (p.count > 1 && pool_run(n, p, body, const_cast<void*>(static_cast<const void*>(&f)))) return;
  // One chunk, a busy pool or a nested loop: the same ranges, in order, on this thread.
  for (int64_t c = 0; c < p.count; ++c) f(c * p.size, std::min(n, (c + 1) * p.size));
}

}  // namespace terra::cpu
