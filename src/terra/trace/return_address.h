// Whether a word read from a frame chain is a return address. The C++ location walk follows saved
// frame pointers; a program compiled without them (plain `g++ -O2`) leaves whatever it keeps in
// rbp there, and the walk would read stack words or heap pointers as "frames" that change from step
// to step — every op a new path, a fallback per step. The walk stops at the first word that is not
// the address right after a call instruction in loaded code.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace terra::trace {

namespace detail {
// Cache of addresses already validated: sets of two entries (one cache line holds both), so two
// return addresses of one walk that hash alike do not evict each other on every call (a direct-
// mapped cache did, depending on where the linker put the code: ~200 instructions an op). Entries
// are whole words written atomically; a stale entry is still a validated address (code is not
// unloaded under a running step).
constexpr size_t kSeen = 1024;
extern std::atomic<uintptr_t> g_seen[kSeen];
inline size_t seen_set(uintptr_t a) { return size_t((a * 0x9E3779B97F4A7C15ull) >> 54) & (kSeen - 2); }
bool is_return_address_slow(uintptr_t a);  // a cache miss: checks the code, then caches `a`
}  // namespace detail

// True when `a` lies in an executable segment of a loaded object and (on x86-64) follows a call
// instruction. Validated addresses are cached, so a steady loop pays a load or two per frame,
// inline (the walk runs on every op call in a graph mode).
inline bool is_return_address(uintptr_t a) {
  const std::atomic<uintptr_t>* set = detail::g_seen + detail::seen_set(a);
  if (a != 0 && (set[0].load(std::memory_order_relaxed) == a || set[1].load(std::memory_order_relaxed) == a)) return true;
  return detail::is_return_address_slow(a);
}

// x86-64: the `room` bytes ending at `end` (room may be less than 7 at a segment's start) end with a
// call instruction. Exposed for tests; always true on other architectures.
bool ends_with_call(const uint8_t* end, uintptr_t room);

}  // namespace terra::trace
