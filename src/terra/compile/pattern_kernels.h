// Precompiled loops for fused kernels whose exact op sequence is known ahead: the update chains of
// terra's own optimizers. A tile still runs each op as its own loop (load, compute, store); these
// run the whole chain per element in registers — the same float operations in the same order as
// the ops' kernels, so the bits are the same. A kernel whose ops, dtypes or operands differ in any
// way (another optimizer, weight decay, an aliased operand) runs the generic tiled path. This is
// the stopgap until fused loops are generated for any chain.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "terra/core/tensor.h"

namespace terra::compile {

struct FusedKernel;

// Runs elements [b, e) of the kernel; slot tensors as for run_fused.
using PatternFn = void (*)(std::span<const Tensor> slots, int64_t b, int64_t e);

struct Pattern {
  const char* name;
  PatternFn fn;
  const char* ops;     // FusedKernel::signature() it implements
  const char* slots;   // per slot: 'f' full-size input, 'w' full-size written in place, 's' scalar,
                       // 't' scratch (no outside reader)
};

// The pattern implementing `k`'s op sequence (null: none).
const Pattern* find_pattern(const FusedKernel& k);
// Whether `slots` are what `p` was written for: full/scalar/scratch as listed, float32, and no
// written slot sharing storage with another full-size one (the loop uses restrict pointers).
bool pattern_applies(const Pattern& p, const FusedKernel& k, std::span<const Tensor> slots);

}  // namespace terra::compile
