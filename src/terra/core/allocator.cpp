#include "terra/core/allocator.h"

#include <algorithm>
#include <atomic>
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
  std::vector<void*> free_blocks[kClasses];  // guarded by mu
};
Pool& pool() {
  static Pool* p = new Pool;  // leaked on purpose: tensors may die during static destruction
  return *p;
}

// Counters without a lock: every allocation and free updates them.
struct Counters {
  std::atomic<int64_t> in_use{0}, peak{0}, cached{0}, allocations{0}, hits{0};
};
Counters& counters() {
  static Counters* c = new Counters;
  return *c;
}

void note_in_use(int64_t delta) {
  Counters& c = counters();
  int64_t now = c.in_use.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t peak = c.peak.load(std::memory_order_relaxed);
  while (now > peak && !c.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

// A per-thread cache in front of the shared pool: in co-execution the GraphRunner allocates what
// the host thread frees, and a shared lock taken by both on every op made them queue on each
// other. Blocks move between a thread and the pool in batches.
constexpr size_t kThreadBlocks = 32;  // per class, before half of them go back to the pool
constexpr size_t kRefill = 8;         // blocks taken from the pool at once
constexpr size_t kThreadBytes = size_t(32) << 20;

struct ThreadCache {
  std::vector<void*> blocks[kClasses];
  size_t bytes = 0;
  bool alive = true;
  void give_back(int c, size_t keep) {  // moves all but `keep` blocks of class c to the pool
    std::vector<void*>& v = blocks[c];
    if (v.size() <= keep) return;
    Pool& p = pool();
    std::lock_guard<std::mutex> g(p.mu);
    size_t n = v.size() - keep;
    p.free_blocks[c].insert(p.free_blocks[c].end(), v.end() - std::ptrdiff_t(n), v.end());
    v.resize(keep);
    bytes -= n * class_size(c);
  }
  void flush() {
    for (int c = 0; c < kClasses; ++c) give_back(c, 0);
  }
  ~ThreadCache() {
    flush();
    alive = false;
  }
};
ThreadCache& thread_cache() {
  thread_local ThreadCache tc;
  return tc;
}

}  // namespace

void* allocate(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  if (nbytes > SIZE_MAX / 2) throw std::bad_alloc();  // rounding up below must not wrap
  int c = class_of(nbytes);
  size_t sz = c >= 0 ? class_size(c) : (nbytes + kAlign - 1) / kAlign * kAlign;
  Counters& k = counters();
  k.allocations.fetch_add(1, std::memory_order_relaxed);
  if (c >= 0) {
    ThreadCache& tc = thread_cache();
    std::vector<void*>& v = tc.blocks[c];
    if (v.empty() && tc.alive) {
      Pool& p = pool();
      std::lock_guard<std::mutex> g(p.mu);
      std::vector<void*>& f = p.free_blocks[c];
      size_t n = std::min(f.size(), kRefill);
      v.insert(v.end(), f.end() - std::ptrdiff_t(n), f.end());
      f.resize(f.size() - n);
      tc.bytes += n * sz;
    }
    if (!v.empty()) {
      void* b = v.back();
      v.pop_back();
      tc.bytes -= sz;
      k.cached.fetch_sub(int64_t(sz), std::memory_order_relaxed);
      k.hits.fetch_add(1, std::memory_order_relaxed);
      note_in_use(int64_t(sz));
      return b;
    }
  }
  void* b = std::aligned_alloc(kAlign, sz);
  if (!b) {
    k.allocations.fetch_sub(1, std::memory_order_relaxed);  // the block was never handed out
    throw std::bad_alloc();
  }
  note_in_use(int64_t(sz));
  return b;
}

void deallocate(void* b, size_t nbytes) {
  if (!b) return;
  if (nbytes == 0) nbytes = 1;
  int c = class_of(nbytes);
  size_t sz = c >= 0 ? class_size(c) : (nbytes + kAlign - 1) / kAlign * kAlign;
  note_in_use(-int64_t(sz));
  if (c < 0) {
    std::free(b);
    return;
  }
  counters().cached.fetch_add(int64_t(sz), std::memory_order_relaxed);
  ThreadCache& tc = thread_cache();
  if (!tc.alive) {  // thread exit: straight to the pool
    Pool& p = pool();
    std::lock_guard<std::mutex> g(p.mu);
    p.free_blocks[c].push_back(b);
    return;
  }
  tc.blocks[c].push_back(b);
  tc.bytes += sz;
  if (tc.blocks[c].size() > kThreadBlocks) tc.give_back(c, kThreadBlocks / 2);
  if (tc.bytes > kThreadBytes) tc.flush();
}

AllocatorStats allocator_stats() {
  Counters& k = counters();
  AllocatorStats s;
  s.bytes_in_use = k.in_use.load();
  s.peak_bytes_in_use = k.peak.load();
  s.bytes_cached = k.cached.load();
  s.allocations = k.allocations.load();
  s.cache_hits = k.hits.load();
  return s;
}

void reset_peak_memory() { counters().peak.store(counters().in_use.load()); }

void empty_cache() {
  // Blocks other threads keep in their caches stay there until they allocate them or exit.
  thread_cache().flush();
  Pool& p = pool();
  std::lock_guard<std::mutex> g(p.mu);
  int64_t freed = 0;
  for (int c = 0; c < kClasses; ++c) {
    for (void* b : p.free_blocks[c]) std::free(b);
    freed += int64_t(p.free_blocks[c].size() * class_size(c));
    p.free_blocks[c].clear();
  }
  counters().cached.fetch_sub(freed);
}

}  // namespace terra
