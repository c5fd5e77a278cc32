// Counter-based random numbers (Philox 4x32-10). The global generator only hands out
// (seed, offset) ranges; kernels derive every number from the key and the element index.
#pragma once
#include <array>
#include <cstdint>

#include "terra/core/op.h"

namespace terra {

void manual_seed(uint64_t seed);
// Reserves `count` counters from the global generator and returns the key of the range.
PhiloxKey reserve_random(uint64_t count);
struct GeneratorState {
  uint64_t seed, offset;
};
GeneratorState generator_state();
void set_generator_state(GeneratorState s);

std::array<uint32_t, 4> philox(uint64_t seed, uint64_t counter);
// The i-th uniform in [0, 1) / standard normal of a key's stream.
inline float uniform_at(PhiloxKey k, uint64_t i) {
  uint32_t r = philox(k.seed, k.offset + i)[0];
  return float(r >> 8) * (1.0f / 16777216.0f);
}
double uniform64_at(PhiloxKey k, uint64_t i);
double normal_at(PhiloxKey k, uint64_t i);

}  // namespace terra
