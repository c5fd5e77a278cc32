// Waiting primitives shared by the intra-op pool and the co-execution runtime: process-private
// futexes (std::atomic::wait uses shared ones here, whose key lookup pins the page on every
// wake-up) and a short spin that yields, so on a loaded machine it gives its core away.
#pragma once
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace terra {

inline void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
inline void futex_wake(std::atomic<uint32_t>& word, int count = 1) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
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
