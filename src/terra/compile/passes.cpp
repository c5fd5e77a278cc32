#include "terra/compile/passes.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace terra::compile {
namespace {

constexpr unsigned kCount = unsigned(Pass::Count);
const char* const kNames[kCount] = {"fuse_elementwise", "side_by_side", "jit_elementwise"};

unsigned env_mask() {
  unsigned m = 0;
  if (const char* env = std::getenv("TERRA_PASSES_OFF"))
    for (unsigned p = 0; p < kCount; ++p)
      if (std::strstr(env, kNames[p])) m |= 1u << p;
  return m;
}

}  // namespace

namespace detail {
std::atomic<unsigned> g_passes_off{env_mask()};
}

const char* pass_name(Pass p) { return unsigned(p) < kCount ? kNames[unsigned(p)] : "?"; }
void set_pass_enabled(Pass p, bool on) {
  if (on) detail::g_passes_off.fetch_and(~(1u << unsigned(p)));
  else detail::g_passes_off.fetch_or(1u << unsigned(p));
}

}  // namespace terra::compile
