#include "terra/core/allocator.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace terra {
namespace {

constexpr size_t kAlign = 64;
constexpr int kClasses = 48;

// Size classes: powers of two up to 4 KiB, then four classes per doubling, to bound waste at 25 %.
size_t class_size(int c) {
  if (c <= 6) return size_t(64) << c;  // 64 .. 4096
  int k = c - 6;
  size_t base = size_t(4096) << ((k - 1) / 4);
  return base + base / 4 * (((k - 1) % 4) + 1);
}
int class_of(size_t n) {
  for (int c = 0; c < kClasses; ++c)
    if (class_size(c) >= n) return c;
  return -1;  // too large: not cached
}

struct Pool {
  std::mutex mu;
  std::vector<void*> free_blocks[kClasses];
  AllocatorStats stats;
};
Pool& pool() {
  static Pool* p = new Pool;  // leaked on purpose: tensors may die during static destruction
  return *p;
}

}  // namespace

void* allocate(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  if (nbytes > SIZE_MAX / 2) throw std::bad_alloc();  // rounding up below must not wrap
  int c = class_of(nbytes);
  size_t sz = c >= 0 ? class_size(c) : (nbytes + kAlign - 1) / kAlign * kAlign;
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> g(p.mu);
    p.stats.allocations++;
    p.stats.bytes_in_use += int64_t(sz);
    if (p.stats.bytes_in_use > p.stats.peak_bytes_in_use) p.stats.peak_bytes_in_use = p.stats.bytes_in_use;
    if (c >= 0 && !p.free_blocks[c].empty()) {
      void* b = p.free_blocks[c].back();
      p.free_blocks[c].pop_back();
      p.stats.bytes_cached -= int64_t(sz);
      p.stats.cache_hits++;
      return b;
    }
  }
  void* b = std::aligned_alloc(kAlign, sz);
  if (!b) {
    std::lock_guard<std::mutex> g(p.mu);  // the block was never handed out
    p.stats.allocations--;
    p.stats.bytes_in_use -= int64_t(sz);
    throw std::bad_alloc();
  }
  return b;
}

void deallocate(void* b, size_t nbytes) {
  if (!b) return;
  if (nbytes == 0) nbytes = 1;
  int c = class_of(nbytes);
  size_t sz = c >= 0 ? class_size(c) : (nbytes + kAlign - 1) / kAlign * kAlign;
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> g(p.mu);
    p.stats.bytes_in_use -= int64_t(sz);
    if (c >= 0) {
      p.free_blocks[c].push_back(b);
      p.stats.bytes_cached += int64_t(sz);
      return;
    }
  }
  std::free(b);
}

AllocatorStats allocator_stats() {
  std::lock_guard<std::mutex> g(pool().mu);
  return pool().stats;
}

void reset_peak_memory() {
  std::lock_guard<std::mutex> g(pool().mu);
  pool().stats.peak_bytes_in_use = pool().stats.bytes_in_use;
}

void empty_cache() {
  Pool& p = pool();
  std::lock_guard<std::mutex> g(p.mu);
  for (auto& v : p.free_blocks) {
    for (void* b : v) std::free(b);
    v.clear();
  }
  p.stats.bytes_cached = 0;
}

}  // namespace terra
