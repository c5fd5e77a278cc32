// A reference-counted buffer. Views share one Storage, and with it the version counter that
// autograd uses to refuse values overwritten in place after they were saved.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "terra/core/allocator.h"

namespace terra {

struct Storage {
  explicit Storage(size_t n) : data(n ? allocate(n) : nullptr), nbytes(n) {}
  Storage() = default;  // no data yet: a placeholder that a graph mode fills in later
  ~Storage() { deallocate(data, nbytes); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data = nullptr;
  size_t nbytes = 0;
  std::atomic<uint64_t> version{0};
  // A graph mode recorded an in-place write here: the host bytes may be stale (or being written
  // by the GraphRunner) from then on, so host-side value checks never read them. Sticky.
  std::atomic<bool> deferred_write{false};
  // The host may write these bytes behind terra's back: a NumPy array's buffer (terra.from_numpy)
  // or a storage handed to NumPy as a writable view (Tensor.numpy()). Such writes bump no version
  // and reach no graph, so a graph mode that would read the bytes after the op call copies them at
  // the call instead (host_snapshot in tensor.h): it reads what eager would have read. Sticky.
  std::atomic<bool> foreign{false};
};

}  // namespace terra
