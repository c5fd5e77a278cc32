// linear as one op when it has a bias: the GEMM and the bias add (and, for linear_relu, the relu)
// in one kernel pass (backend matmul_kernels.h), with exactly the bits of matmul(x, w.t()) then
// add(y, b) (then relu), in the forward and in the gradients (the composition's ops on the same
// operand layouts).
#include "terra/ops/linear.h"

#include <stdexcept>
#include <string>

#include "terra/backend/matmul_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/linalg.h"
#include "terra/ops/reduce.h"
#include "terra/ops/views.h"

namespace terra {
namespace {

void check_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  if (!x.defined()) throw std::invalid_argument("[linear] input is undefined");
  if (!w.defined()) throw std::invalid_argument("[linear] weight is undefined");
  if (x.dim() < 1)
    throw std::invalid_argument("[linear] input must have at least 1 dim, got shape " + shape_str(x.shape()));
  if (w.dim() != 2)
    throw std::invalid_argument("[linear] weight must be 2-D [out, in], got shape " + shape_str(w.shape()));
  if (x.shape().back() != w.shape()[1])
    throw std::invalid_argument("[linear] input of shape " + shape_str(x.shape()) + " has " +
                                std::to_string(x.shape().back()) + " features but weight of shape " +
                                shape_str(w.shape()) + " expects " + std::to_string(w.shape()[1]));
  if (b.defined() && b.shape() != Shape{w.shape()[0]})
    throw std::invalid_argument("[linear] bias of shape " + shape_str(b.shape()) + " does not match weight of shape " +
                                shape_str(w.shape()) + " (expected [" + std::to_string(w.shape()[0]) + "])");
  if (x.dtype() != w.dtype() || (b.defined() && b.dtype() != x.dtype()))
    throw std::invalid_argument(std::string("[linear] dtype mismatch: input ") + dtype_name(x.dtype()) + " " +
                                shape_str(x.shape()) + ", weight " + dtype_name(w.dtype()) + " " + shape_str(w.shape()) +
                                (b.defined() ? std::string(", bias ") + dtype_name(b.dtype()) : std::string()));
  if (x.dtype() == DType::Bool) throw std::invalid_argument("[linear] bool tensors are not supported");
}

// ---- linear: inputs (x [..., in] rank >= 2, w [out, in], b [out]).
TensorMetas infer_linear(std::span<const Tensor> in, const Attrs&) {
  check_linear(in[0], in[1], in[2]);
  if (in[0].dim() < 2) throw std::invalid_argument("[linear] internal: the op takes an input of rank >= 2");
  Shape s = in[0].shape();
  s.back() = in[1].shape()[0];
  return {{s, in[0].dtype()}};
}

// What the composition's autograd did: add's gradient for b, matmul's for x and w^T, and the
// transpose's for w, in that order.
TensorList linear_grads(const GradArgs& g, const Tensor& go) {
  const Shape& ws = g.in_meta[1].shape;
  Tensor gb = sum_to(go, g.in_meta[2].shape);
  const Tensor &x = g.in[0], &w = g.in[1];
  if (x.dim() == 2 && ws[0] > 1 && ws[1] > 1 && w.impl()->is_contiguous()) {
    // The usual case (2-D input, contiguous weight), without the composition's five views: its x
    // grad multiplied go by w^T^T, a view with w's own layout, and its w grad was (go^T x)^T^T, a
    // view of go^T x with that product's layout. The same two products on the same operand layouts
    // give the same bits; in co-execution each view was one more op for the skeleton and the runner.
    return {matmul(go, w), matmul(transpose(go, 0, 1), x), gb};
  }
  TensorList r = matmul_backward(go, x, transpose(w, 0, 1), g.in_meta[0].shape, {ws[1], ws[0]});
  return {r[0], transpose(r[1], 0, 1), gb};
}
TensorList grad_linear(const GradArgs& g) { return linear_grads(g, g.grad_out[0]); }
// relu's gradient first, as relu's own grad wrote it: where(out > 0, grad, 0).
TensorList grad_linear_relu(const GradArgs& g) {
  return linear_grads(g, where(gt(g.out[0], 0.0), g.grad_out[0], 0.0));
}

// Multiply-adds: every output element sums in_features products.
int64_t work_linear(std::span<const Tensor> in, std::span<const TensorMeta> out, const Attrs&) {
  return numel_of(out[0].shape) * (in[0].dim() > 0 ? in[0].shape().back() : 1);
}

void kernel_linear(const KernelArgs& k) { kernels::linear(k, false); }
void kernel_linear_relu(const KernelArgs& k) { kernels::linear(k, true); }

// The bias is not saved: its gradient needs only its shape (and it may be updated in place
// before the backward, as with the composed add).
const OpDef kLinear{.name = "linear", .flags = kSaveInputs, .infer = infer_linear, .kernel = kernel_linear,
                    .grad = grad_linear, .unsaved_in = 1u << 2, .work = work_linear};
// Keeps its output for the relu mask, as relu did.
const OpDef kLinearRelu{.name = "linear_relu", .flags = kSaveInputs | kSaveOutputs, .infer = infer_linear,
                        .kernel = kernel_linear_relu, .grad = grad_linear_relu, .unsaved_in = 1u << 2, .work = work_linear};
OpRegistrar r1(kLinear), r2(kLinearRelu);

// x [..., in] through `op`; a 1-D input goes through [1, in] as matmul would take it.
Tensor call(const OpDef& op, const Tensor& x, const Tensor& w, const Tensor& b) {
  if (x.dim() == 1) return squeeze(dispatch1(op, {unsqueeze(x, 0), w, b}), -2);
  return dispatch1(op, {x, w, b});
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_linear(x, w, b);
  if (!b.defined()) return matmul(x, transpose(w, 0, 1));
  return call(kLinear, x, w, b);
}

Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_linear(x, w, b);
  if (!b.defined()) return relu(linear(x, w, b));
  return call(kLinearRelu, x, w, b);
}

}  // namespace terra
