// The saved-frame-pointer walk that names a C++ call site (trace::capture_location, and the Python
// binding's walk below its interpreter frames). Inline, so each caller's own frame starts it.
#pragma once
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

}  // namespace terra::trace
