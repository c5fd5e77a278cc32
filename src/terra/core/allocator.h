// Host allocator that keeps freed blocks in size classes for reuse, so a training step that
// allocates the same shapes every iteration stops calling malloc after the first one. Blocks up to
// 64 KiB go through per-thread caches; larger ones through one shared pool that keeps at most the
// program's peak bytes in use (at least 256 MiB) and is emptied when the system runs out of memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace terra {

struct AllocatorStats {
  int64_t bytes_in_use = 0;    // handed out and not yet freed
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_cached = 0;    // freed, kept for reuse
  int64_t allocations = 0;     // calls to allocate()
  int64_t cache_hits = 0;      // of those, served from the cache
};

// A tensor's storage could not be allocated: "[op] cannot allocate N bytes for shape [..]".
// The Python binding raises it as MemoryError.
struct OutOfMemory : std::runtime_error {
  explicit OutOfMemory(const std::string& what) : std::runtime_error(what) {}
};

// Throws std::bad_alloc when the system has no block of `nbytes` (callers that know the op and the
// shape turn it into OutOfMemory).
void* allocate(size_t nbytes);
void deallocate(void* p, size_t nbytes);
AllocatorStats allocator_stats();
void reset_peak_memory();
void empty_cache();  // returns cached blocks to the system

}  // namespace terra
