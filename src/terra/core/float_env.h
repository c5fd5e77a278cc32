// How terra's kernels treat denormal (subnormal) floats, and the scope that gives a thread that
// environment while it runs kernels.
//
// A training loop's optimizer state decays into the denormal range: Adam's moments of a weight whose
// gradient is 0 (a dead ReLU unit, a memorized batch) shrink by beta every step, and once below
// FLT_MIN the CPU handles each operation on them in microcode, many times slower. Measured on issue
// #9's MLP (one thread, bench/denormals): Adam's update went from 146 to 441 µs a step after ~700
// steps, and stayed there. So, as TensorFlow's CPU kernels do, terra's kernels flush denormals by
// default: results below FLT_MIN become 0 (FTZ) and denormal inputs read as 0 (DAZ). Only terra's
// kernels run so: a user's thread gets its own environment back when the kernel returns.
#pragma once
#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define TERRA_HAS_MXCSR 1
#endif

namespace terra {

// torch's name. true (the default): terra's kernels flush denormals to zero; false: IEEE gradual
// underflow, as torch's default. Takes effect at the next kernel. Returns whether this CPU can
// flush (x86; elsewhere the call changes nothing and returns false for true).
bool set_flush_denormal(bool on);
bool flush_denormal();

namespace detail {
extern std::atomic<bool> g_flush_denormal;
#ifdef TERRA_HAS_MXCSR
constexpr unsigned kFtzDaz = 0x8040;  // MXCSR bit 15 (flush to zero) and bit 6 (denormals are zero)
inline unsigned wanted_mxcsr(unsigned now) {
  return g_flush_denormal.load(std::memory_order_relaxed) ? now | kFtzDaz : now & ~kFtzDaz;
}
#endif
}  // namespace detail

// Every path that runs kernels opens one (execute_eager_into, run_fused, a pool job): on a thread
// already set (terra's own: the runner, pool workers) it costs a read of the control register.
class KernelFloatEnv {
 public:
  KernelFloatEnv() {
#ifdef TERRA_HAS_MXCSR
    saved_ = _mm_getcsr();
    const unsigned want = detail::wanted_mxcsr(saved_);
    if (want != saved_) {
      _mm_setcsr(want);
      changed_ = true;
    }
#endif
  }
  ~KernelFloatEnv() {
#ifdef TERRA_HAS_MXCSR
    // The caller's modes back; exception flags the kernels raised stay raised, as they would be.
    if (changed_) _mm_setcsr((_mm_getcsr() & ~detail::kFtzDaz) | (saved_ & detail::kFtzDaz));
#endif
  }
  KernelFloatEnv(const KernelFloatEnv&) = delete;
  KernelFloatEnv& operator=(const KernelFloatEnv&) = delete;

 private:
  unsigned saved_ = 0;
  bool changed_ = false;
};

// For terra's own threads (the GraphRunner, pool workers), which run nothing but kernels: sets the
// environment for good, so their kernels' scopes change nothing.
inline void set_thread_float_env() {
#ifdef TERRA_HAS_MXCSR
  const unsigned now = _mm_getcsr(), want = detail::wanted_mxcsr(now);
  if (want != now) _mm_setcsr(want);
#endif
}

}  // namespace terra
