#include "terra/core/random.h"

#include <cmath>
#include <mutex>

namespace terra {
namespace {
std::mutex g_mu;
uint64_t g_seed = 0x5eed;
uint64_t g_offset = 0;
}  // namespace

void manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> g(g_mu);
  g_seed = seed;
  g_offset = 0;
}

PhiloxKey reserve_random(uint64_t count) {
  std::lock_guard<std::mutex> g(g_mu);
  PhiloxKey k{g_seed, g_offset};
  g_offset += count;
  return k;
}

GeneratorState generator_state() {
  std::lock_guard<std::mutex> g(g_mu);
  return {g_seed, g_offset};
}
void set_generator_state(GeneratorState s) {
  std::lock_guard<std::mutex> g(g_mu);
  g_seed = s.seed;
  g_offset = s.offset;
}

std::array<uint32_t, 4> philox(uint64_t seed, uint64_t counter) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0;
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    c1 = uint32_t(p1);
    c3 = uint32_t(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

double uniform64_at(PhiloxKey k, uint64_t i) {
  auto r = philox(k.seed, k.offset + i);
  uint64_t bits = (uint64_t(r[0]) << 21) ^ uint64_t(r[1]);
  return double(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

double normal_at(PhiloxKey k, uint64_t i) {
  auto r = philox(k.seed, k.offset + i);
  double u1 = (double(r[0]) + 1.0) * (1.0 / 4294967297.0);  // (0, 1]: log is finite
  double u2 = double(r[1]) * (1.0 / 4294967296.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace terra
