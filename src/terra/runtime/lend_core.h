// The co-execution host lends its core while it waits for its GraphRunner: a blocked host is an
// idle core, and the runner's loops can take it as a guest helper (cpu::pool_help) with no wake-up.
#pragma once
#include <cstdint>
#include <type_traits>

#include "terra/autograd/grad_mode.h"
#include "terra/backend/cpu/thread_pool.h"
#include "terra/core/executor.h"

namespace terra::runtime {

// How long a waiting host helps before it sleeps: a training step's fetch waits are a few hundred
// microseconds; a longer wait (a big kernel) gets workers through the usual route.
constexpr int64_t kLendCoreUs = 2000;

// Helps the pool until ready() holds or kLendCoreUs passed; returns ready()'s last value. Chunks
// run here as on a pool worker: eagerly (none of this thread's executors) and recording no autograd.
template <class F>
bool lend_core_while(F&& ready) {
  EagerScope eager;
  NoGradGuard no_grad;
  using Fn = std::remove_reference_t<F>;
  return cpu::pool_help([](void* c) { return bool((*static_cast<Fn*>(c))()); }, &ready, kLendCoreUs);
}

}  // namespace terra::runtime
