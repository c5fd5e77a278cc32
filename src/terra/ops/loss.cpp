#include "terra/ops/loss.h"

#include <stdexcept>
#include <string>

#include "terra/backend/loss_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/creation.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/loss_common.h"
#include "terra/ops/reduce.h"

namespace terra {
namespace {

using namespace loss;

Tensor reduce_loss(const Tensor& l, int64_t r) {
  if (r == kMean) return mean(l);
  if (r == kSum) return sum(l);
  return l;
}

// ---- nll_loss: inputs (log_probs, targets); attrs ignore_index, reduction.
TensorMetas infer_nll(std::span<const Tensor> in, const Attrs& a) {
  check_nll_inputs("nll_loss", in[0], in[1]);
  return {{a.i("reduction") == kNone ? in[1].shape() : Shape{}, in[0].dtype()}};
}

int64_t nll_targets(std::span<const Tensor> in, const Attrs& a) {
  return kernels::check_targets(in[1], nll_layout(in[0].shape()).c, a.i("ignore_index"));
}
void values_nll(std::span<const Tensor> in, const Attrs& a) { nll_targets(in, a); }

void kernel_nll(const KernelArgs& k) {
  int64_t used = nll_targets(k.in, k.attrs);
  kernels::nll_loss(k.in[0], k.in[1], xent_shape(k.in[0].shape(), k.attrs, used), k.out[0]);
}

TensorList grad_nll(const GradArgs& g) {
  return {nll_loss_backward(g.grad_out[0], g.in[1], g.in_meta[0].shape, g.attrs.i("ignore_index"),
                            g.attrs.i("reduction")),
          Tensor()};
}

// ---- nll_loss_backward: inputs (grad, targets); attrs ignore_index, reduction, shape.
TensorMetas infer_nll_bw(std::span<const Tensor> in, const Attrs& a) {
  const Shape& s = a.ints("shape");
  Shape want_g = a.i("reduction") == kNone ? target_shape_for(s) : Shape{};
  if (in[0].shape() != want_g || in[1].shape() != target_shape_for(s) || in[1].dtype() != DType::Int64)
    throw std::invalid_argument("[nll_loss_backward] grad " + shape_str(in[0].shape()) + " and targets " +
                                shape_str(in[1].shape()) + " do not fit an input of shape " + shape_str(s));
  if (!is_floating(in[0].dtype()))
    throw std::invalid_argument(std::string("[nll_loss_backward] grad must be floating, got ") + dtype_name(in[0].dtype()) +
                                " of shape " + shape_str(in[0].shape()));
  return {{s, in[0].dtype()}};
}

int64_t nll_bw_targets(std::span<const Tensor> in, const Attrs& a) {
  return kernels::check_targets(in[1], nll_layout(a.ints("shape")).c, a.i("ignore_index"));
}
void values_nll_bw(std::span<const Tensor> in, const Attrs& a) { nll_bw_targets(in, a); }

void kernel_nll_bw(const KernelArgs& k) {
  int64_t used = nll_bw_targets(k.in, k.attrs);
  kernels::nll_loss_backward(k.in[0], k.in[1], xent_shape(k.out[0].shape(), k.attrs, used), k.out[0]);
}

// The backward is linear in grad; its adjoint picks -v[target] again: nll_loss itself.
TensorList grad_nll_bw(const GradArgs& g) {
  Tensor v = g.grad_out[0];
  const Tensor& t = g.in[1];
  if (v.dtype() != g.in_meta[0].dtype) v = v.to(g.in_meta[0].dtype);
  int64_t red = g.attrs.i("reduction");
  const char* names[] = {"none", "mean", "sum"};
  return {nll_loss(v, t, g.attrs.i("ignore_index"), names[red]), Tensor()};
}

const OpDef kNll{.name = "nll_loss", .flags = kSaveInputs, .infer = infer_nll, .kernel = kernel_nll,
                 .grad = grad_nll, .check_values = values_nll, .check_inputs = 1u << 1};
const OpDef kNllBackward{.name = "nll_loss_backward", .flags = kSaveInputs, .infer = infer_nll_bw,
                         .kernel = kernel_nll_bw, .grad = grad_nll_bw, .check_values = values_nll_bw,
                         .check_inputs = 1u << 1};
OpRegistrar r1(kNll), r2(kNllBackward);

// ---- binary cross entropy with logits (elementwise, unreduced); inputs (x, t).
TensorMetas infer_bce(std::span<const Tensor> in, const Attrs&) {
  if (in[0].shape() != in[1].shape())
    throw std::invalid_argument("[binary_cross_entropy_with_logits] targets of shape " + shape_str(in[1].shape()) +
                                " must have the logits' shape " + shape_str(in[0].shape()));
  if (!is_floating(in[0].dtype()) || in[0].dtype() != in[1].dtype())
    throw std::invalid_argument(std::string("[binary_cross_entropy_with_logits] logits and targets must share a "
                                            "floating dtype, got ") +
                                dtype_name(in[0].dtype()) + " and " + dtype_name(in[1].dtype()));
  return {{in[0].shape(), in[0].dtype()}};
}
TensorList grad_bce(const GradArgs& g) {
  const Tensor &go = g.grad_out[0], &x = g.in[0];
  return {binary_cross_entropy_with_logits_backward(go, x, g.in[1]), neg(mul(go, x))};
}

// inputs (g, x, t): g * (sigmoid(x) - t).
TensorMetas infer_bce_bw(std::span<const Tensor> in, const Attrs&) {
  if (in[0].shape() != in[1].shape() || in[1].shape() != in[2].shape() || in[0].dtype() != in[1].dtype() ||
      in[1].dtype() != in[2].dtype() || !is_floating(in[0].dtype()))
    throw std::invalid_argument("[binary_cross_entropy_with_logits_backward] grad " + shape_str(in[0].shape()) +
                                ", logits " + shape_str(in[1].shape()) + " and targets " + shape_str(in[2].shape()) +
                                " must share shape and floating dtype");
  return {{in[1].shape(), in[1].dtype()}};
}
// out = g * (s - t), s = sigmoid(x); ds/dx = s * (1 - s).
TensorList grad_bce_bw(const GradArgs& a) {
  const Tensor &v = a.grad_out[0], &g = a.in[0], &x = a.in[1], &t = a.in[2];
  Tensor s = sigmoid(x);
  Tensor gg = binary_cross_entropy_with_logits_backward(v, x, t);
  Tensor gx = mul(mul(v, g), mul(s, sub(ones_like(s), s)));
  Tensor gt = neg(mul(v, g));
  return {gg, gx, gt};
}

const OpDef kBce{.name = "binary_cross_entropy_with_logits", .flags = kElementwise | kSaveInputs,
                 .infer = infer_bce, .kernel = kernels::binary_cross_entropy_with_logits, .grad = grad_bce};
const OpDef kBceBackward{.name = "binary_cross_entropy_with_logits_backward", .flags = kElementwise | kSaveInputs,
                         .infer = infer_bce_bw,
                         .kernel = kernels::binary_cross_entropy_with_logits_backward, .grad = grad_bce_bw};
OpRegistrar r3(kBce), r4(kBceBackward);

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, std::string reduction) {
  check_nll_inputs("nll_loss", log_probs, targets);
  int64_t red = reduction_code("nll_loss", reduction);
  return dispatch1(kNll, {log_probs, targets}, Attrs{{"ignore_index", ignore_index}, {"reduction", red}});
}

Tensor nll_loss_backward(const Tensor& grad, const Tensor& targets, const Shape& log_probs_shape,
                         int64_t ignore_index, int64_t reduction) {
  if (!grad.defined() || !targets.defined()) throw std::invalid_argument("[nll_loss_backward] input is undefined");
  if (reduction < kNone || reduction > kSum)
    throw std::invalid_argument("[nll_loss_backward] reduction code must be 0, 1 or 2, got " +
                                std::to_string(reduction));
  return dispatch1(kNllBackward, {grad, targets},
                   Attrs{{"ignore_index", ignore_index}, {"reduction", reduction}, {"shape", log_probs_shape}});
}

Tensor mse_loss(const Tensor& a, const Tensor& b, std::string reduction) {
  if (!a.defined() || !b.defined()) throw std::invalid_argument("[mse_loss] input is undefined");
  if (!is_floating(a.dtype()) || !is_floating(b.dtype()))
    throw std::invalid_argument(std::string("[mse_loss] inputs must be floating, got ") + dtype_name(a.dtype()) +
                                " " + shape_str(a.shape()) + " and " + dtype_name(b.dtype()) + " " +
                                shape_str(b.shape()));
  int64_t red = reduction_code("mse_loss", reduction);
  broadcast_shapes("mse_loss", a.shape(), b.shape());
  Tensor d = sub(a, b);
  return reduce_loss(mul(d, d), red);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, std::string reduction) {
  if (!logits.defined() || !targets.defined())
    throw std::invalid_argument("[binary_cross_entropy_with_logits] input is undefined");
  int64_t red = reduction_code("binary_cross_entropy_with_logits", reduction);
  if (!is_floating(logits.dtype()))
    throw std::invalid_argument(std::string("[binary_cross_entropy_with_logits] logits must be floating, got ") +
                                dtype_name(logits.dtype()) + " of shape " + shape_str(logits.shape()));
  Tensor t = targets.dtype() == logits.dtype() ? targets : targets.to(logits.dtype());
  return reduce_loss(dispatch1(kBce, {logits, t}), red);
}

Tensor binary_cross_entropy_with_logits_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets) {
  return dispatch1(kBceBackward, {grad, logits, targets});
}

}  // namespace terra
