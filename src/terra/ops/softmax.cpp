#include "terra/ops/softmax.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "terra/backend/softmax_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/reduce.h"

namespace terra {
namespace {

TensorMetas infer_softmax_like(const char* op, std::span<const Tensor> in, const Attrs& a) {
  if (!is_floating(in[0].dtype()))
    throw std::invalid_argument(std::string("[") + op + "] needs a floating tensor, got " + dtype_name(in[0].dtype()) +
                                " of shape " + shape_str(in[0].shape()));
  wrap_dim(op, a.i("dim"), std::max<int64_t>(in[0].dim(), 1));
  return {{in[0].shape(), in[0].dtype()}};
}
TensorMetas infer_softmax(std::span<const Tensor> in, const Attrs& a) {
  return infer_softmax_like("softmax", in, a);
}
TensorMetas infer_log_softmax(std::span<const Tensor> in, const Attrs& a) {
  return infer_softmax_like("log_softmax", in, a);
}

// ---- backward ops: inputs (grad, y), attr dim.
// Gradients are floating: an integer or bool grad has no kernel (its output would stay unwritten).
TensorMetas infer_bw(const char* op, std::span<const Tensor> in) {
  if (in[0].shape() != in[1].shape() || in[0].dtype() != in[1].dtype())
    throw std::invalid_argument(std::string("[") + op + "] grad " + shape_str(in[0].shape()) + " and output " +
                                shape_str(in[1].shape()) + " must have the same shape and dtype");
  if (!is_floating(in[0].dtype()))
    throw std::invalid_argument(std::string("[") + op + "] grad and output must be floating, got " +
                                dtype_name(in[0].dtype()) + " of shape " + shape_str(in[0].shape()));
  return {{in[1].shape(), in[1].dtype()}};
}
TensorMetas infer_softmax_bw(std::span<const Tensor> in, const Attrs&) {
  return infer_bw("softmax_backward", in);
}
TensorMetas infer_log_softmax_bw(std::span<const Tensor> in, const Attrs&) {
  return infer_bw("log_softmax_backward", in);
}

TensorList grad_softmax(const GradArgs& g) {
  return {softmax_backward(g.grad_out[0], g.out[0], g.attrs.i("dim"))};
}
TensorList grad_log_softmax(const GradArgs& g) {
  return {log_softmax_backward(g.grad_out[0], g.out[0], g.attrs.i("dim"))};
}

// out = y * (go - sum(go * y)): linear in go (its adjoint is itself); d/dy from the product rule.
TensorList grad_softmax_bw(const GradArgs& a) {
  int64_t d = a.attrs.i("dim");
  const Tensor &v = a.grad_out[0], &go = a.in[0], &y = a.in[1];
  Tensor s = sum(mul(go, y), {d}, true);
  Tensor gg = softmax_backward(v, y, d);
  Tensor gy = sub(mul(v, sub(go, s)), mul(go, sum(mul(v, y), {d}, true)));
  return {gg, gy};
}
// out = go - p * sum(go) with p = exp(y).
TensorList grad_log_softmax_bw(const GradArgs& a) {
  int64_t d = a.attrs.i("dim");
  const Tensor &v = a.grad_out[0], &go = a.in[0], &y = a.in[1];
  Tensor p = exp(y);
  Tensor gg = sub(v, sum(mul(v, p), {d}, true));
  Tensor gy = neg(mul(mul(v, p), sum(go, {d}, true)));
  return {gg, gy};
}

const OpDef kSoftmax{.name = "softmax", .flags = kSaveOutputs, .infer = infer_softmax,
                     .kernel = kernels::softmax, .grad = grad_softmax};
const OpDef kLogSoftmax{.name = "log_softmax", .flags = kSaveOutputs, .infer = infer_log_softmax,
                        .kernel = kernels::log_softmax, .grad = grad_log_softmax};
const OpDef kSoftmaxBackward{.name = "softmax_backward", .flags = kSaveInputs, .infer = infer_softmax_bw,
                             .kernel = kernels::softmax_backward, .grad = grad_softmax_bw};
const OpDef kLogSoftmaxBackward{.name = "log_softmax_backward", .flags = kSaveInputs, .infer = infer_log_softmax_bw,
                                .kernel = kernels::log_softmax_backward, .grad = grad_log_softmax_bw};
OpRegistrar r1(kSoftmax), r2(kLogSoftmax), r3(kSoftmaxBackward), r4(kLogSoftmaxBackward);

Tensor forward_call(const OpDef& op, const Tensor& x, int64_t dim) {
  if (!x.defined()) throw std::invalid_argument(std::string("[") + op.name + "] input is undefined");
  dim = wrap_dim(op.name, dim, std::max<int64_t>(x.dim(), 1));
  return dispatch1(op, {x}, Attrs{{"dim", dim}});
}

Tensor bw_call(const OpDef& op, const Tensor& g, const Tensor& y, int64_t dim) {
  if (!g.defined() || !y.defined()) throw std::invalid_argument(std::string("[") + op.name + "] input is undefined");
  dim = wrap_dim(op.name, dim, std::max<int64_t>(y.dim(), 1));
  Tensor gg = g.dtype() == y.dtype() ? g : g.to(y.dtype());
  return dispatch1(op, {gg, y}, Attrs{{"dim", dim}});
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return forward_call(kSoftmax, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return forward_call(kLogSoftmax, x, dim); }
Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim) {
  return bw_call(kSoftmaxBackward, grad, y, dim);
}
Tensor log_softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim) {
  return bw_call(kLogSoftmaxBackward, grad, y, dim);
}

}  // namespace terra
