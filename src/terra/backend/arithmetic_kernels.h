// Arithmetic kernels (ops/arithmetic.cpp defines the ops); the backend folder provides them.
// Operands arrive as the dispatcher hands them: same dtype, out allocated (in place: out[0] is
// in[0]); broadcasting is the loops' business.
#pragma once
#include <span>

#include "terra/core/op.h"

namespace terra::kernels {

// out = in[0] op in[1], elementwise with broadcasting. Integer division truncates and never traps
// (a zero divisor was refused by check_divisor first; INT64_MIN / -1 wraps).
void add(const KernelArgs& k);
void sub(const KernelArgs& k);
void mul(const KernelArgs& k);
void div(const KernelArgs& k);
void neg(const KernelArgs& k);
// The element functions over float32 slices, for fused tiles (OpDef::tile_f32): the same
// arithmetic as the kernels above.
void tile_add(const TileArgs& t);
void tile_sub(const TileArgs& t);
void tile_mul(const TileArgs& t);
void tile_div(const TileArgs& t);
void tile_neg(const TileArgs& t);
// Throws `[op] integer division by zero ...` when an integer divisor `b` has a zero element.
void check_divisor(const char* op, const Tensor& a, const Tensor& b);
// copy_: out[0] (= in[0]) takes in[1] broadcast to its shape, converted to its dtype.
void copy_into(const KernelArgs& k);
// fill_: every element of out[0] becomes attrs "value".
void fill(const KernelArgs& k);

}  // namespace terra::kernels
