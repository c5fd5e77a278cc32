// A fused elementwise kernel: a run of elementwise ops over one shape executed tile by tile, so
// every intermediate lives in a cache-sized scratch buffer instead of a full tensor in memory.
// Each tile runs the ops' own kernels in program order on [tile]-long slices: the per-element
// arithmetic is exactly the unfused ops' (same functions, same rounding), so results are
// bit-identical to running the ops one by one — only the loop order across ops changes, which
// elementwise ops (element i reads only element i, or a broadcast scalar) cannot observe. When
// every op has a float32 tile function, generated code (backend/cpu/jit_elementwise.h) runs the
// kernel with its values in registers instead: the same operations per element, the same bits.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "terra/core/op.h"

namespace terra::cpu {
class JitKernel;
}

namespace terra::compile {

// Ops whose kernels map element i of every full-size operand to element i of the output, with
// no randomness, no shape-dependent attributes and no error they could raise mid-run.
bool fusible_elementwise(const OpDef& op);
// The same, for one call's dtypes (integer division checks its divisor: never fused).
bool fusible_elementwise(const OpDef& op, DType dtype);

// Values are numbered slots: the group's outside inputs first, then one per op output (an
// in-place op writes its target's slot again).
struct FusedOp {
  const OpDef* op = nullptr;
  const Attrs* attrs = nullptr;
  std::vector<uint32_t> in;  // slots read
  uint32_t out = 0;          // slot written
};

// One worker's tile views of a kernel's slots (fused_elementwise.cpp), kept between runs so a run
// allocates nothing in steady state. Copies of a kernel start with an empty pool.
struct TileViews;
class TileViewsPool {
 public:
  TileViewsPool();
  TileViewsPool(const TileViewsPool&);
  TileViewsPool& operator=(const TileViewsPool&);
  ~TileViewsPool();
  std::unique_ptr<TileViews> take();
  void give(std::unique_ptr<TileViews> v);

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<TileViews>> free_;
};

// The generated code of a kernel for the slot kinds of its last run (fused_elementwise.cpp).
// Copies start empty.
class JitCache {
 public:
  JitCache() = default;
  JitCache(const JitCache&) {}
  JitCache& operator=(const JitCache&) { return *this; }
  template <class Make>
  std::shared_ptr<const cpu::JitKernel> get(std::span<const uint8_t> kinds, Make&& make) {
    std::lock_guard<std::mutex> g(mu_);
    if (!tried_ || !std::equal(kinds.begin(), kinds.end(), kinds_.begin(), kinds_.end())) {
      kinds_.assign(kinds.begin(), kinds.end());
      code_ = make();
      tried_ = true;
    }
    return code_;
  }

 private:
  std::mutex mu_;
  bool tried_ = false;
  std::vector<uint8_t> kinds_;
  std::shared_ptr<const cpu::JitKernel> code_;
};

struct FusedKernel {
  int64_t numel = 0;              // elements of every full-size slot
  std::vector<DType> slot_dtype;  // per slot
  std::vector<FusedOp> ops;
  std::string signature() const;  // the ops and their slots, e.g. "%1=sqrt(%0) %3=div(%1,%2)"
  std::string describe() const;   // one line for explain output: element count and signature
  mutable TileViewsPool views;    // run_fused's per-worker views, reused
  mutable JitCache jit;           // run_fused's generated code (float32 kernels of tile functions)
};

// Runs `k`. `slots[s]`: a contiguous tensor of k.numel elements (an outside input, or an output the
// caller allocated because someone reads it later), a one-element tensor (a broadcast scalar),
// or undefined (scratch: lives only inside a tile). Parallel over tiles with a fixed partition,
// so the result does not depend on the thread count either.
void run_fused(const FusedKernel& k, std::span<const Tensor> slots);

// Elements per tile: a few tens of kilobytes per scratch slot, so a tile's working set stays in L1/L2.
constexpr int64_t kFusedTile = 2048;

}  // namespace terra::compile
