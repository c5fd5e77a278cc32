#include "terra/compile/passes.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace terra::compile {
namespace {

constexpr unsigned kCount = unsigned(Pass::Count);
const char* const kNames[kCount] = {"fuse_elementwise", "side_by_side", "jit_elementwise"};

std::atomic<unsigned>& off_mask() {
  static std::atomic<unsigned> mask = [] {
    unsigned m = 0;
    if (const char* env = std::getenv("TERRA_PASSES_OFF"))
      for (unsigned p = 0; p < kCount; ++p)
        if (std::strstr(env, kNames[p])) m |= 1u << p;
    return m;
  }();
  return mask;
}

}  // namespace

const char* pass_name(Pass p) { return unsigned(p) < kCount ? kNames[unsigned(p)] : "?"; }
bool pass_enabled(Pass p) { return !(off_mask().load(std::memory_order_relaxed) >> unsigned(p) & 1u); }
void set_pass_enabled(Pass p, bool on) {
  if (on) off_mask().fetch_and(~(1u << unsigned(p)));
  else off_mask().fetch_or(1u << unsigned(p));
}

}  // namespace terra::compile
