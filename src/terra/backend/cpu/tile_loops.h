// Element loops over float32 slices for OpDef::tile_f32: the same element function as the op's
// kernel, applied to raw pointers (a fused tile has no tensors to dispatch on). One loop per
// operand pattern so each vectorizes; the per-element arithmetic is the kernel's, so the bits are.
#pragma once
#include <cstdint>

#include "terra/core/op.h"

namespace terra::cpu {

template <class F>
void tile_unary(const TileArgs& t) {
  const float* a = t.in[0];
  float* o = t.out;
  const F f{};
  if (t.step[0] == 0) {
    const float v = f(a[0]);
    for (int64_t i = 0; i < t.n; ++i) o[i] = v;
    return;
  }
  for (int64_t i = 0; i < t.n; ++i) o[i] = f(a[i]);
}

template <class F>
void tile_binary(const TileArgs& t) {
  const float* a = t.in[0];
  const float* b = t.in[1];
  float* o = t.out;
  const F f{};
  if (t.step[0] == 1 && t.step[1] == 1) {
    for (int64_t i = 0; i < t.n; ++i) o[i] = f(a[i], b[i]);
  } else if (t.step[0] == 1) {
    const float w = b[0];
    for (int64_t i = 0; i < t.n; ++i) o[i] = f(a[i], w);
  } else if (t.step[1] == 1) {
    const float w = a[0];
    for (int64_t i = 0; i < t.n; ++i) o[i] = f(w, b[i]);
  } else {
    const float v = f(a[0], b[0]);
    for (int64_t i = 0; i < t.n; ++i) o[i] = v;
  }
}

}  // namespace terra::cpu
