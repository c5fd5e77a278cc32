// Elementwise math kernels (ops/elementwise_math.cpp defines the ops); the backend folder provides
// them. Operands arrive as the dispatcher hands them: same dtype (floating where the op says so),
// out allocated; broadcasting is the loops' business.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// out = pow(in[0], in[1]), floating, with broadcasting.
void pow(const KernelArgs& k);
// out = pow(in[0], attrs "exponent"), floating; exponents 2, 1, 0.5 and -1 compute a * a, a,
// sqrt(a) and 1 / a instead.
void pow_scalar(const KernelArgs& k);
// out = sqrt(in[0]), 1 / sqrt(in[0]), log(in[0]); floating.
void sqrt(const KernelArgs& k);
void rsqrt(const KernelArgs& k);
void log(const KernelArgs& k);
// out = |in[0]| (-0 and NaN unchanged), sign(in[0]) (-1, 0 or 1; NaN stays NaN); int64 or floating.
void abs(const KernelArgs& k);
void sign(const KernelArgs& k);
// out = in[0] clamped to [attrs "min", attrs "max"], each bound only where has_min / has_max says;
// int64 or floating, NaN passes.
void clamp(const KernelArgs& k);
// out = the larger / smaller of in[0] and in[1] with broadcasting, any dtype; NaN on either side
// propagates.
void maximum(const KernelArgs& k);
void minimum(const KernelArgs& k);
// The element functions over float32 slices, for fused tiles (OpDef::tile_f32): the same
// arithmetic as the kernels above.
void tile_sqrt(const TileArgs& t);
void tile_rsqrt(const TileArgs& t);
void tile_abs(const TileArgs& t);
void tile_maximum(const TileArgs& t);
void tile_minimum(const TileArgs& t);

}  // namespace terra::kernels
