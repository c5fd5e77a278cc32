#include "terra/core/allocator.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "terra/core/thread_heap.h"

namespace terra {
namespace {

constexpr size_t kAlign = 64;
// Size classes: powers of two up to 4 KiB, then four classes per doubling up to 2^44 bytes, so a
// block wastes at most 25 % of address space (pages of the tail a tensor never touches cost no
// memory). Blocks above 8 MiB used to go back to the system at every free: the next tensor of that
// size page-faulted all its memory in again (an op over a 16 MiB tensor spent ~10 ms there).
constexpr int kClasses = 6 + 4 * (44 - 12) + 1;

size_t class_size(int c) {
  if (c <= 6) return size_t(64) << c;  // 64 .. 4096
  int k = c - 6;
  size_t base = size_t(4096) << ((k - 1) / 4);
  return base + base / 4 * (((k - 1) % 4) + 1);
}
int class_of(size_t n) {  // the smallest class holding n bytes; -1: larger than any
  if (n <= 64) return 0;
  if (n <= 4096) return std::bit_width(n - 1) - 6;
  const int l = std::bit_width(n - 1) - 1;  // 2^l < n <= 2^(l+1)
  const size_t base = size_t(1) << l, quarter = base / 4;
  const int c = 6 + 4 * (l - 12) + int((n - base + quarter - 1) / quarter);
  return c < kClasses ? c : -1;
}

// Blocks above this size skip the per-thread caches: one lock per op on such a block costs nothing
// beside its bytes, and a thread cache holding them would flush its small blocks to make room.
// In co-execution a block is often freed on another thread than the one that made it (the host,
// a pool worker that ran an op side by side): in per-thread caches both threads kept up to 32 MiB
// of such blocks (a residual CNN's RSS growth 82 MB against eager's 43; 57 MB with 64 KiB here).
constexpr size_t kLargeBlock = size_t(64) << 10;

struct Pool {
  std::mutex mu;
  std::vector<void*> free_blocks[kClasses];  // guarded by mu
  // Bytes of large blocks the pool keeps: at most the most bytes ever in use at once
  // (Counters::high), and at least kLargeFloor, so a program whose shapes change keeps at most
  // about its own peak again in free blocks, not every size it ever made.
  size_t large_cached = 0;
};
constexpr size_t kLargeFloor = size_t(256) << 20;
Pool& pool() {
  static Pool* p = new Pool;  // leaked on purpose: tensors may die during static destruction
  return *p;
}

// Counters without a lock: every allocation and free updates them.
struct Counters {
  std::atomic<int64_t> in_use{0}, peak{0}, cached{0}, allocations{0}, hits{0};
  std::atomic<int64_t> high{0};  // the peak reset_peak_memory() does not reset: bounds the large cache
};
Counters& counters() {
  static Counters* c = new Counters;
  return *c;
}

void note_in_use(int64_t delta) {
  Counters& c = counters();
  int64_t now = c.in_use.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t peak = c.peak.load(std::memory_order_relaxed);
  // high >= peak (reset_peak_memory only lowers peak; a reset racing this call can leave high one
  // update short, which only lowers the large cache's cap a little): neither moves.
  if (now <= peak) return;
  while (now > peak && !c.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  int64_t high = c.high.load(std::memory_order_relaxed);
  while (now > high && !c.high.compare_exchange_weak(high, now, std::memory_order_relaxed)) {
  }
}

// Counts block `b` of `sz` bytes, just taken from a cache, as handed out.
void* from_cache(void* b, size_t sz) {
  Counters& c = counters();
  c.cached.fetch_sub(int64_t(sz), std::memory_order_relaxed);
  c.hits.fetch_add(1, std::memory_order_relaxed);
  note_in_use(int64_t(sz));
  return b;
}

// Frees cached large blocks, largest first, until `need` more bytes fit under `cap` (p.mu held).
// Returns whether they do.
bool make_room(Pool& p, size_t need, size_t cap) {
  for (int c = kClasses - 1; c >= 0 && p.large_cached + need > cap; --c) {
    const size_t sz = class_size(c);
    if (sz <= kLargeBlock) break;
    std::vector<void*>& f = p.free_blocks[c];
    while (!f.empty() && p.large_cached + need > cap) {
      std::free(f.back());
      f.pop_back();
      p.large_cached -= sz;
      counters().cached.fetch_sub(int64_t(sz), std::memory_order_relaxed);
    }
  }
  return p.large_cached + need <= cap;
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
// On the heap behind a thread-local pointer (core/thread_heap.h: libterra's TLS block stays small).
inline ThreadCache& thread_cache() { return ThreadHeap<ThreadCache>::get(); }

}  // namespace

void* allocate(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  if (nbytes > SIZE_MAX / 2) throw std::bad_alloc();  // rounding up below must not wrap
  int c = class_of(nbytes);
  size_t sz = c >= 0 ? class_size(c) : (nbytes + kAlign - 1) / kAlign * kAlign;
  Counters& k = counters();
  k.allocations.fetch_add(1, std::memory_order_relaxed);
  if (c >= 0 && sz > kLargeBlock) {
    Pool& p = pool();
    void* b = nullptr;
    {
      std::lock_guard<std::mutex> g(p.mu);
      std::vector<void*>& f = p.free_blocks[c];
      if (!f.empty()) {
        b = f.back();
        f.pop_back();
        p.large_cached -= sz;
      }
    }
    if (b) return from_cache(b, sz);
  } else if (c >= 0) {
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
      return from_cache(b, sz);
    }
  }
  void* b = std::aligned_alloc(kAlign, sz);
  if (!b) {  // the system is out of memory: give back what the pool keeps, and try once more
    {
      Pool& p = pool();
      std::lock_guard<std::mutex> g(p.mu);
      make_room(p, SIZE_MAX / 2, 0);
    }
    b = std::aligned_alloc(kAlign, sz);
  }
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
  if (sz > kLargeBlock) {
    Pool& p = pool();
    const size_t cap = std::max(kLargeFloor, size_t(counters().high.load(std::memory_order_relaxed)));
    std::lock_guard<std::mutex> g(p.mu);
    if (make_room(p, sz, cap)) {
      p.free_blocks[c].push_back(b);
      p.large_cached += sz;
      counters().cached.fetch_add(int64_t(sz), std::memory_order_relaxed);
    } else {
      std::free(b);  // larger than the cap itself
    }
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
  p.large_cached = 0;
  counters().cached.fetch_sub(freed);
}

}  // namespace terra
