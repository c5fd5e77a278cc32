// Fused cross-entropy kernels (log_softmax + nll in one pass per row); the backend folder provides
// them. Operands may be strided (the kernels read contiguous copies), logits seen as [n, c, r] (class
// dim in the middle), targets and per-row statistics as [n, r]; the targets were checked
// (kernels::check_targets, from ops/cross_entropy.cpp) before the call.
#pragma once
#include <cstdint>

#include "terra/core/tensor.h"

namespace terra::kernels {

// XentShape::reduction's codes; ops/ turns "none" / "mean" / "sum" into them (loss::reduction_code).
enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

struct XentShape {
  int64_t n = 1, c = 1, r = 1;  // rows are (n, r); c classes each
  int64_t ignore = -100;        // target value whose row contributes nothing
  int64_t reduction = kMean;    // a Reduction code
  int64_t used = 0;             // rows whose target is not `ignore` (the mean's divisor)
};

// loss: [n, r] (none) or [] = the rows' lse - x[target], summed (sum) or averaged over `used`
// rows (mean) in row order; lse: [n, r] per-row logsumexp, saved for the backward.
void cross_entropy_forward(const Tensor& x, const Tensor& targets, const XentShape& s, Tensor& loss, Tensor& lse);
// out [n, c, r] = (exp(x - lse) - onehot(target)) * grad_row * (1 / used for mean); 0 on ignored
// rows. grad: [n, r] (none) or [].
void cross_entropy_backward(const Tensor& grad, const Tensor& x, const Tensor& targets, const Tensor& lse,
                            const XentShape& s, Tensor& out);

}  // namespace terra::kernels
