// One threading story for the CPU backend: OpenMP, the same runtime oneDNN is built with here,
// so our loops and oneDNN's share one pool instead of fighting for the two cores.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <omp.h>

namespace terra::cpu {

// Elements below which a loop stays on the calling thread (a parallel region costs ~1-2 us).
constexpr int64_t kGrain = 32768;

template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (n < grain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    f(int64_t(0), n);
    return;
  }
  // An exception escaping a parallel region calls std::terminate: each thread catches its own and
  // the first one is rethrown on the calling thread once the region has ended.
  std::exception_ptr err;
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t chunk = (n + nt - 1) / nt;
    int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) {
      try {
        f(b, e);
      } catch (...) {
#pragma omp critical(terra_parallel_for_error)
        if (!err) err = std::current_exception();
      }
    }
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace terra::cpu
