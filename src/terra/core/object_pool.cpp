#include "terra/core/object_pool.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "terra/core/thread_heap.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TERRA_POOL_PASSTHROUGH 1
#endif

namespace terra {
namespace {

constexpr size_t kGranule = 16;
constexpr size_t kClasses = kPoolMaxBytes / kGranule;
// Per class and thread: above 2 * kKeep free blocks, kKeep go to the shared list in one batch.
// Deep enough for the hundreds of values a step keeps alive and frees together.
constexpr uint32_t kKeep = 256;
constexpr size_t kSlab = size_t(64) << 10;

struct FreeNode {
  FreeNode* next;
};
struct Batch {
  FreeNode* head;
  uint32_t n;
};

struct Shared {
  std::mutex mu;
  std::vector<Batch> batches[kClasses];  // guarded by mu
  std::atomic<int64_t> fresh{0}, slab_bytes{0};
};
Shared& shared() {
  static Shared* s = new Shared;  // leaked on purpose: objects may die during static destruction
  return *s;
}

void give(size_t c, Batch b) {
  Shared& s = shared();
  std::lock_guard<std::mutex> g(s.mu);
  s.batches[c].push_back(b);
}

struct Cache {
  FreeNode* head[kClasses] = {};
  uint32_t n[kClasses] = {};
  char* slab = nullptr;
  size_t slab_left = 0;
  bool alive = true;
  ~Cache() {  // thread exit: every free block goes back for other threads
    for (size_t c = 0; c < kClasses; ++c)
      if (head[c]) {
        give(c, {head[c], n[c]});
        head[c] = nullptr;
        n[c] = 0;
      }
    alive = false;
  }
};
// On the heap behind a thread-local pointer (core/thread_heap.h: libterra's TLS block stays small).
inline Cache& this_thread_cache() { return ThreadHeap<Cache>::get(); }

size_t class_of(size_t bytes) { return bytes ? (bytes - 1) / kGranule : 0; }

void* carve(Cache& t, size_t sz) {
  if (t.slab_left < sz) {  // the rest of the old slab (< one block) is left unused
    t.slab = static_cast<char*>(std::aligned_alloc(64, kSlab));
    if (!t.slab) {
      t.slab_left = 0;
      throw std::bad_alloc();
    }
    t.slab_left = kSlab;
    shared().slab_bytes.fetch_add(int64_t(kSlab), std::memory_order_relaxed);
  }
  void* p = t.slab;
  t.slab += sz;
  t.slab_left -= sz;
  shared().fresh.fetch_add(1, std::memory_order_relaxed);
  return p;
}

// The paths past a thread's free list, out of line: the fast paths then need no callee-saved
// registers (their pushes and pops were ~40 % of an allocation's instructions, 8 calls an op).
__attribute__((noinline)) void* allocate_slow(size_t bytes) {
  if (bytes > kPoolMaxBytes) return ::operator new(bytes);
  const size_t c = class_of(bytes);
  Cache& t = this_thread_cache();
  if (!t.head[c] && t.alive) {
    Shared& s = shared();
    std::lock_guard<std::mutex> g(s.mu);
    if (!s.batches[c].empty()) {
      t.head[c] = s.batches[c].back().head;
      t.n[c] = s.batches[c].back().n;
      s.batches[c].pop_back();
    }
  }
  if (FreeNode* p = t.head[c]) {
    t.head[c] = p->next;
    t.n[c]--;
    return p;
  }
  if (!t.alive) return ::operator new((c + 1) * kGranule);  // never freed into a dead cache
  return carve(t, (c + 1) * kGranule);
}

__attribute__((noinline)) void deallocate_slow(void* p, size_t bytes) {
  if (bytes > kPoolMaxBytes) return ::operator delete(p);
  const size_t c = class_of(bytes);
  FreeNode* node = static_cast<FreeNode*>(p);
  Cache& t = this_thread_cache();
  if (!t.alive) {  // a thread_local destroyed after the cache frees an object
    node->next = nullptr;
    return give(c, {node, 1});
  }
  node->next = t.head[c];
  t.head[c] = node;
  if (++t.n[c] <= 2 * kKeep) return;
  // Hand the kKeep most recently freed blocks to the shared list (the thread that allocates what
  // this one frees, the GraphRunner's values freed by the host, takes them in one lock).
  FreeNode* last = t.head[c];
  for (uint32_t i = 1; i < kKeep; ++i) last = last->next;
  Batch b{t.head[c], kKeep};
  t.head[c] = last->next;
  last->next = nullptr;
  t.n[c] -= kKeep;
  give(c, b);
}

}  // namespace

void* pool_allocate(size_t bytes) {
#ifdef TERRA_POOL_PASSTHROUGH
  return ::operator new(bytes);
#else
  if (const size_t m = bytes - 1; m < kPoolMaxBytes) [[likely]] {  // 1..kPoolMaxBytes (0 wraps: slow path)
    const size_t c = m / kGranule;
    Cache& t = this_thread_cache();
    if (FreeNode* p = t.head[c]) [[likely]] {
      t.head[c] = p->next;
      t.n[c]--;
      return p;
    }
  }
  return allocate_slow(bytes);
#endif
}

void pool_deallocate(void* p, size_t bytes) {
#ifdef TERRA_POOL_PASSTHROUGH
  ::operator delete(p);
#else
  if (!p) return;
  if (const size_t m = bytes - 1; m < kPoolMaxBytes) [[likely]] {
    const size_t c = m / kGranule;
    Cache& t = this_thread_cache();
    if (t.alive && t.n[c] < 2 * kKeep) [[likely]] {
      FreeNode* node = static_cast<FreeNode*>(p);
      node->next = t.head[c];
      t.head[c] = node;
      t.n[c]++;
      return;
    }
  }
  deallocate_slow(p, bytes);
#endif
}

PoolStats pool_stats() {
  Shared& s = shared();
  return {s.fresh.load(std::memory_order_relaxed), s.slab_bytes.load(std::memory_order_relaxed)};
}

}  // namespace terra
