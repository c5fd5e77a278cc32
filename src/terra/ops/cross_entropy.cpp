// cross_entropy as one op (log_softmax + nll_loss fused): the forward saves the per-row
// logsumexp instead of a whole log_softmax tensor, and the backward writes
// (softmax - onehot) * scale in one pass. Kernels: backend/cross_entropy_kernels.h.
#include <stdexcept>
#include <string>

#include "terra/backend/cross_entropy_kernels.h"
#include "terra/backend/loss_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/loss.h"
#include "terra/ops/loss_common.h"
#include "terra/ops/reduce.h"
#include "terra/ops/softmax.h"
#include "terra/ops/views.h"

namespace terra {
namespace {

using namespace loss;

int64_t class_dim(const Shape& logits) { return logits.size() == 1 ? 0 : 1; }

// ---- cross_entropy: inputs (logits, targets); outputs (loss, lse [targets' shape]).
TensorMetas infer_ce(std::span<const Tensor> in, const Attrs& a) {
  check_nll_inputs("cross_entropy", in[0], in[1]);
  return {{a.i("reduction") == kNone ? in[1].shape() : Shape{}, in[0].dtype()}, {in[1].shape(), in[0].dtype()}};
}

int64_t ce_targets(const Tensor& logits, const Tensor& targets, const Attrs& a) {
  return kernels::check_targets(targets, nll_layout(logits.shape()).c, a.i("ignore_index"));
}
void values_ce(std::span<const Tensor> in, const Attrs& a) { ce_targets(in[0], in[1], a); }

void kernel_ce(const KernelArgs& k) {
  int64_t used = ce_targets(k.in[0], k.in[1], k.attrs);
  kernels::cross_entropy_forward(k.in[0], k.in[1], xent_shape(k.in[0].shape(), k.attrs, used), k.out[0], k.out[1]);
}

// d loss / d x is the backward op; the saved lse, if used downstream, adds softmax * its grad.
TensorList grad_ce(const GradArgs& g) {
  const Tensor &x = g.in[0], &t = g.in[1], &lse = g.out[1];
  Tensor gx;
  if (g.grad_out[0].defined())
    gx = cross_entropy_backward(g.grad_out[0], x, t, lse, g.attrs.i("ignore_index"), g.attrs.i("reduction"));
  if (g.grad_out[1].defined()) {
    int64_t cd = class_dim(x.shape());
    Tensor gl = g.grad_out[1].dtype() == x.dtype() ? g.grad_out[1] : g.grad_out[1].to(x.dtype());
    Tensor extra = mul(softmax(x, cd), unsqueeze(gl, cd));
    gx = gx.defined() ? add(gx, extra) : extra;
  }
  return {gx, Tensor()};
}

// ---- cross_entropy_backward: inputs (grad, logits, targets, lse); attrs ignore_index, reduction.
TensorMetas infer_ce_bw(std::span<const Tensor> in, const Attrs& a) {
  const Tensor &g = in[0], &x = in[1], &t = in[2], &lse = in[3];
  check_nll_inputs("cross_entropy_backward", x, t);
  Shape want_g = a.i("reduction") == kNone ? t.shape() : Shape{};
  if (g.shape() != want_g || g.dtype() != x.dtype() || lse.shape() != t.shape() || lse.dtype() != x.dtype())
    throw std::invalid_argument("[cross_entropy_backward] grad " + std::string(dtype_name(g.dtype())) + " " +
                                shape_str(g.shape()) + " and lse " + dtype_name(lse.dtype()) + " " +
                                shape_str(lse.shape()) + " do not fit logits " + dtype_name(x.dtype()) + " " +
                                shape_str(x.shape()) + " (expected grad " + shape_str(want_g) + ", lse " +
                                shape_str(t.shape()) + ")");
  return {{x.shape(), x.dtype()}};
}

void values_ce_bw(std::span<const Tensor> in, const Attrs& a) { ce_targets(in[1], in[2], a); }

void kernel_ce_bw(const KernelArgs& k) {
  int64_t used = ce_targets(k.in[1], k.in[2], k.attrs);
  kernels::cross_entropy_backward(k.in[0], k.in[1], k.in[2], k.in[3], xent_shape(k.in[1].shape(), k.attrs, used),
                                  k.out[0]);
}

// out = (p - onehot) * s with p = exp(x - lse) and s the row's scale (grad, masked, / used for
// mean). Written with nll ops, which know the mask and the divisor: onehot * s = -nll_loss_backward.
TensorList grad_ce_bw(const GradArgs& a) {
  const Tensor &v = a.grad_out[0], &g = a.in[0], &x = a.in[1], &t = a.in[2], &lse = a.in[3];
  const int64_t ignore = a.attrs.i("ignore_index"), red = a.attrs.i("reduction"), cd = class_dim(x.shape());
  const char* names[] = {"none", "mean", "sum"};
  Tensor p = exp(sub(x, unsqueeze(lse, cd)));
  Tensor s = sum(neg(nll_loss_backward(g, t, x.shape(), ignore, red)), {cd}, true);  // row scale
  Tensor gx = mul(mul(v, p), s);
  Tensor glse = neg(sum(gx, {cd}));
  // out is linear in g: its adjoint maps v to sum over the row of v * (p - onehot), masked and scaled.
  Tensor gg = nll_loss(sub(v, expand(sum(mul(v, p), {cd}, true), x.shape())), t, ignore, names[red]);
  return {gg, gx, Tensor(), glse};
}

const OpDef kCrossEntropy{.name = "cross_entropy", .flags = kSaveInputs | kSaveOutputs, .infer = infer_ce,
                          .kernel = kernel_ce, .grad = grad_ce, .check_values = values_ce,
                          .check_inputs = 1u << 1, .unsaved_out = 1u << 0};
const OpDef kCrossEntropyBackward{.name = "cross_entropy_backward", .flags = kSaveInputs, .infer = infer_ce_bw,
                                  .kernel = kernel_ce_bw, .grad = grad_ce_bw, .check_values = values_ce_bw,
                                  .check_inputs = 1u << 2};
OpRegistrar r1(kCrossEntropy), r2(kCrossEntropyBackward);

}  // namespace

std::vector<Tensor> cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                          std::string reduction) {
  check_nll_inputs("cross_entropy", logits, targets);
  int64_t red = reduction_code("cross_entropy", reduction);
  return dispatch(kCrossEntropy, {logits, targets}, Attrs{{"ignore_index", ignore_index}, {"reduction", red}});
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, std::string reduction) {
  return cross_entropy_forward(logits, targets, ignore_index, std::move(reduction))[0];
}

Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                              int64_t ignore_index, int64_t reduction) {
  if (!grad.defined() || !lse.defined()) throw std::invalid_argument("[cross_entropy_backward] input is undefined");
  check_nll_inputs("cross_entropy_backward", logits, targets);
  if (reduction < kNone || reduction > kSum)
    throw std::invalid_argument("[cross_entropy_backward] reduction code must be 0, 1 or 2, got " +
                                std::to_string(reduction));
  Tensor g = grad.dtype() == logits.dtype() ? grad : grad.to(logits.dtype());
  return dispatch1(kCrossEntropyBackward, {g, logits, targets, lse},
                   Attrs{{"ignore_index", ignore_index}, {"reduction", reduction}});
}

}  // namespace terra
