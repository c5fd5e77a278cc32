// What the class-index losses share (nll_loss, cross_entropy and their backward ops): reduction
// codes, the target checks with their messages, and the [N, C, R] view of the logits. The targets'
// values are checked by kernels::check_targets (backend/loss_kernels.h).
#pragma once
#include <cstdint>
#include <string>

#include "terra/backend/cross_entropy_kernels.h"
#include "terra/core/attrs.h"
#include "terra/core/tensor.h"

namespace terra::loss {

using kernels::kMean;  // the reduction codes the kernels read (backend/cross_entropy_kernels.h)
using kernels::kNone;
using kernels::kSum;
using kernels::Reduction;

// "none" / "mean" / "sum" to a Reduction; anything else throws "[op] reduction must be ...".
int64_t reduction_code(const char* op, const std::string& r);

// The target shape a [N, C, d...] (or [C]) input expects: the input's shape without dim 1 (or []).
Shape target_shape_for(const Shape& in);

// Defined, floating input with a class dim, int64 targets of target_shape_for(input).
void check_nll_inputs(const char* op, const Tensor& x, const Tensor& t);

// [N, C, R] view of the input, with N = 1 for a 1-D input.
struct NllLayout {
  int64_t n = 1, c = 1, r = 1;
};
NllLayout nll_layout(const Shape& s);

// The kernels' view of an input of shape `s` (nll_layout), with attrs ignore_index and reduction
// and `used`, the number of non-ignored targets (what kernels::check_targets returns).
kernels::XentShape xent_shape(const Shape& s, const Attrs& a, int64_t used);

}  // namespace terra::loss
