// Waiting primitives shared by the intra-op pool and the co-execution runtime: process-private
// futexes (std::atomic::wait uses shared ones here, whose key lookup pins the page on every
// wake-up) and a short spin that yields, so on a loaded machine it gives its core away.
#pragma once
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace terra {

inline void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
inline void futex_wait_for(std::atomic<uint32_t>& word, uint32_t expected, long ns) {
  timespec ts{ns / 1000000000, ns % 1000000000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}
inline void futex_wake(std::atomic<uint32_t>& word, int count = 1) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

// An asymmetric Dekker fence. A producer that stores a word and then checks whether its consumer
// sleeps needs a full fence between the two: an xchg that waits for every earlier store to leave
// the core, the stored line being polled by the consumer (the co-execution host makes one per
// op; perf put 4-15 % of skeleton_call's own samples right after it). With the kernel's
// membarrier, the producer needs only a compiler fence, and the consumer, on its rare way to sleep,
// makes every running thread of the process execute a full barrier: then either the consumer sees
// the store or the producer sees it asleep. True once registered (Linux >= 4.14; else the
// producer keeps the full fence).
bool heavy_barrier_available();
// The consumer's side, only once heavy_barrier_available(); false if the kernel refused (then a
// producer's store may still be invisible: the consumer's sleep must be bounded).
bool heavy_barrier();
// The producer's side: stores `v`, fenced against a later load of the consumer's sleep flag.
inline void store_before_sleep_check(std::atomic<uint64_t>& word, uint64_t v, bool light) {
  if (light) {
    word.store(v, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    word.store(v, std::memory_order_seq_cst);
  }
}

// Up to `rounds` rounds of 64 pauses, each round ending in a yield, until ready(); returns ready().
template <class F>
bool spin_until(F&& ready, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      __builtin_ia32_pause();
    }
    if (ready()) return true;
    sched_yield();
  }
  return ready();
}

}  // namespace terra
