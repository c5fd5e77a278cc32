// Generated AVX2 code for a fused float32 elementwise kernel. Every value of the chain stays in a
// ymm register from the op that makes it to its last reader, so a chain of k ops is one pass over
// memory and k short instruction sequences per 8 elements (the tile interpreter runs k loops over
// an L1 tile instead). Each op's sequence is the IEEE operations of its element function, in the
// same order, on the same constants (vector_math.h): the same bits as eager. Xbyak (the JIT
// assembler oneDNN uses, header-only) assembles a kernel in microseconds, so a kernel is made the
// first time it runs, on the thread that runs it, and cached by its ops and slot kinds.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "terra/core/op.h"

namespace terra::cpu {

// How a slot reaches the kernel: a full-size array, one value broadcast to every element, or a
// value that lives only in registers (never stored).
enum class JitSlot : uint8_t { Full, Scalar, Scratch };

struct JitOp {
  const OpDef* op = nullptr;
  uint32_t in[2] = {0, 0};
  uint32_t n_in = 0;
  uint32_t out = 0;  // an in-place op writes its target's slot again
};

// Elements per iteration of the generated loop.
constexpr int64_t kJitWidth = 8;

class JitKernel {
 public:
  using Fn = void (*)(float* const* ptrs, int64_t n);
  JitKernel(std::shared_ptr<void> code, Fn fn, size_t bytes) : code_(std::move(code)), fn_(fn), bytes_(bytes) {}
  // ptrs[s]: a Full slot's element 0 of this range, a Scalar slot's value, unused for Scratch.
  // n: a multiple of kJitWidth. Full slots written by the kernel must not overlap other slots.
  void operator()(float* const* ptrs, int64_t n) const { fn_(ptrs, n); }
  size_t code_bytes() const { return bytes_; }

 private:
  std::shared_ptr<void> code_;  // the assembler that owns the executable memory
  Fn fn_;
  size_t bytes_;
};

// Whether `op` has a generated sequence (the ops with a float32 tile function, OpDef::tile_f32).
bool jit_supports(const OpDef& op);
// The kernel for `ops` over `slots`, or null: no AVX2 on this CPU, an op without a sequence, more
// values alive at once than registers, or a write to a Scalar slot. Cached process-wide.
std::shared_ptr<const JitKernel> jit_elementwise(std::span<const JitOp> ops, std::span<const JitSlot> slots);
// Kernels assembled by this process (tests: a kernel that should be generated was).
int64_t jit_kernels_made();

}  // namespace terra::cpu
