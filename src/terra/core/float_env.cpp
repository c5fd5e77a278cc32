#include "terra/core/float_env.h"

namespace terra {

namespace detail {
std::atomic<bool> g_flush_denormal{true};
}

bool set_flush_denormal(bool on) {
  detail::g_flush_denormal.store(on, std::memory_order_relaxed);
#ifdef TERRA_HAS_MXCSR
  return true;
#else
  return !on;
#endif
}

bool flush_denormal() {
#ifdef TERRA_HAS_MXCSR
  return detail::g_flush_denormal.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

}  // namespace terra
