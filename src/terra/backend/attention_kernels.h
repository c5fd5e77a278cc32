// Fused attention kernels; the backend folder provides them. Shapes were validated by the op's
// inference (ops/attention.cpp): batch dims broadcast, outputs are contiguous over the broadcast
// batch shape. Every result is a fixed function of the shapes, never of the thread count.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// in: q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv], [mask broadcasting to [..., Sq, Sk]]
// out: o [..., Sq, Dv], weights [..., Sq, Sk] (or [0] when not save_weights).
// Attrs: scale, is_causal, save_weights.
void scaled_dot_product_attention(const KernelArgs& k);
// in: grad_o, q, k, v, weights, [bool mask]   out: dq, dk, dv, [d scores [..., Sq, Sk] when
// scores_grad]. Attrs: scale, is_causal, scores_grad. Masked scores get a zero gradient.
void scaled_dot_product_attention_backward(const KernelArgs& k);

}  // namespace terra::kernels
