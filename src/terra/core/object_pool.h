// Small-object pool for the objects every op call makes and drops: TensorImpl, Storage, autograd
// nodes, placeholders' pending values. glibc's per-thread cache holds 7 blocks per size, so a step
// that keeps hundreds of them alive and frees them together (or frees on the host what the
// GraphRunner made) falls through to the arenas' locked paths; tcmalloc measured 22-45 % off the
// per-op cost of every mode (bench/op_costs). Here each thread keeps deep free lists per 16-byte
// class and trades them with a shared list in batches, so steady-state op calls never reach malloc.
// Under ASan/TSan it forwards to operator new/delete, so the sanitizers still see every object.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>

namespace terra {

// Blocks up to kPoolMaxBytes, 16-byte aligned; larger requests go to operator new.
constexpr size_t kPoolMaxBytes = 1024;
void* pool_allocate(size_t bytes);
void pool_deallocate(void* p, size_t bytes);

struct PoolStats {
  int64_t fresh_blocks = 0;  // blocks carved from new slabs (not reused)
  int64_t slab_bytes = 0;    // bytes of slabs taken from the system (never returned)
};
PoolStats pool_stats();

template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) {}
  T* allocate(size_t n) {
    static_assert(alignof(T) <= 16, "pooled objects are 16-byte aligned");
    return static_cast<T*>(pool_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) { pool_deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const {
    return true;
  }
};

// std::make_shared with the object and its control block in one pooled block.
template <class T, class... A>
std::shared_ptr<T> make_pooled(A&&... a) {
  return std::allocate_shared<T>(PoolAllocator<T>{}, std::forward<A>(a)...);
}

}  // namespace terra
