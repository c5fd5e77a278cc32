// The saved-frame-pointer walk that names a C++ call site (trace::capture_location, and the Python
// binding's walk below its interpreter frames). Inline, so each caller's own frame starts it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "terra/trace/return_address.h"

namespace terra::trace {

// From the frame record `fp` ([saved fp, return address]) outward, appends return addresses to
// `out` until: `stop(ret)` holds for the next one, the record reaches `base` (when non-null), a word
// is not a return address (code built without frame pointers: the rest is not a chain), the chain
// stops growing toward older frames (garbage), or `max` frames were taken.
template <class Stop>
inline void walk_frames(uintptr_t* fp, const uintptr_t* base, int max, std::vector<uintptr_t>& out, Stop&& stop) {
  for (int n = 0; fp && n < max; ++n) {
    if (base && fp >= base) break;
    const uintptr_t ret = fp[1];
    if (stop(ret) || !is_return_address(ret)) break;
    out.push_back(ret);
    auto* next = reinterpret_cast<uintptr_t*>(fp[0]);
    if (next <= fp) break;
    fp = next;
  }
}

// The walk above, compared with `expected` (a chain it once made, or a prefix of one that ends at a
// 0) instead of building one: the length of the chain it would make if that is exactly `expected`'s
// first entries up to its end or its first 0, else -1. No copy, and no return-address check for an
// address equal to the expected one: that one passed the check when it was recorded (and `stop`
// was false for it), so the walk would take it again. Records only grow toward older frames on a
// chain, so the base is checked once, on the last record compared. The first `skip` entries are
// walked but not compared (a caller one call site away from where the chain was made).
template <class Stop>
inline ptrdiff_t walk_matches(uintptr_t* fp, const uintptr_t* base, int max, const uintptr_t* expected, size_t size,
                              Stop&& stop, size_t skip = 0) {
  size_t i = 0;
  uintptr_t* last = nullptr;  // the record of the last entry compared
  bool ended = false;         // the chain ends after it (the next record is not above it)
  for (; i < skip && i < size && expected[i] != 0; ++i) {  // walked, not compared
    if (!fp || ended) return -1;
    last = fp;
    auto* next = reinterpret_cast<uintptr_t*>(fp[0]);
    ended = next <= fp;
    fp = next;
  }
  for (; i < size && expected[i] != 0; ++i) {
    if (!fp || ended || fp[1] != expected[i]) return -1;
    last = fp;
    auto* next = reinterpret_cast<uintptr_t*>(fp[0]);
    ended = next <= fp;
    fp = next;
  }
  if (i > size_t(max > 0 ? max : 0) || (base && last && last >= base)) return -1;
  // The walk stops here: its chain was exactly these entries.
  if (ended || !fp || i == size_t(max) || (base && fp >= base) || stop(fp[1]) || !is_return_address(fp[1]))
    return ptrdiff_t(i);
  return -1;
}

}  // namespace terra::trace
