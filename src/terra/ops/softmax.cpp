#include "terra/ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/sum_loops.h"
#include "terra/backend/cpu/vector_math.h"
#include "terra/core/dispatch.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/reduce.h"

namespace terra {
namespace {

// A contiguous tensor seen as [outer, n, inner] around `dim`.
struct RowLayout {
  int64_t outer = 1, n = 1, inner = 1;
};
RowLayout layout_of(const Shape& s, int64_t dim) {
  RowLayout l;
  if (s.empty()) return l;
  for (int64_t d = 0; d < dim; ++d) l.outer *= s[size_t(d)];
  l.n = s[size_t(dim)];
  for (size_t d = size_t(dim) + 1; d < s.size(); ++d) l.inner *= s[d];
  return l;
}

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

// One contiguous row of n elements at x, into o: the max, the exponentials (vexp, the vector exp
// every kernel shares) and their sum in sum_row's fixed lanes, as plain loops that vectorize.
template <bool kLog, class T>
void softmax_row(const T* x, T* o, int64_t n, T* tmp) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j]);
  T* e = kLog ? tmp : o;
  for (int64_t j = 0; j < n; ++j) e[j] = cpu::any_exp(T(x[j] - m));
  const double s = cpu::sum_row<double>(e, n);
  if constexpr (kLog) {
    T lse = m + T(std::log(s));
    for (int64_t j = 0; j < n; ++j) o[j] = x[j] - lse;
  } else {
    T inv = T(1.0 / s);
    for (int64_t j = 0; j < n; ++j) o[j] *= inv;
  }
}

template <bool kLog>
void kernel_softmax_t(const KernelArgs& k) {
  Tensor x = cpu::contiguous_raw(k.in[0]);
  RowLayout l = layout_of(x.shape(), k.attrs.i("dim"));
  visit_floating(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* px = x.impl()->data_as<T>();
    T* po = k.out[0].impl()->data_as<T>();
    const int64_t rows = l.outer * l.inner, n = l.n, st = l.inner;
    cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      // Per chunk: the row's exponentials, and a strided row (a softmax over an inner dim) gathered
      // and its result, so strided and contiguous rows take the same arithmetic.
      std::vector<T> buf(static_cast<size_t>((st == 1 ? 1 : 3) * n));
      for (int64_t r = b; r < e; ++r) {
        const int64_t base = (r / st) * n * st + r % st;
        if (st == 1) {
          softmax_row<kLog>(px + base, po + base, n, buf.data());
          continue;
        }
        T *xr = buf.data() + n, *orow = xr + n;
        for (int64_t j = 0; j < n; ++j) xr[j] = px[base + j * st];
        softmax_row<kLog>(xr, orow, n, buf.data());
        for (int64_t j = 0; j < n; ++j) po[base + j * st] = orow[j];
      }
    });
  });
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

// One contiguous row of the backward: s = sum(g) (log_softmax) or sum(g * y) (softmax), in double
// over sum_row's fixed lanes, then o = g - exp(y) * s or o = y * (g - s).
template <bool kLog, class T>
void softmax_bw_row(const T* g, const T* y, T* o, int64_t n, double* prod) {
  double s;
  if constexpr (kLog) {
    s = cpu::sum_row<double>(g, n);
  } else {
    for (int64_t j = 0; j < n; ++j) prod[j] = double(g[j]) * double(y[j]);
    s = cpu::sum_row<double>(prod, n);
  }
  const T ts = T(s);
  if constexpr (kLog)
    for (int64_t j = 0; j < n; ++j) o[j] = g[j] - cpu::any_exp(y[j]) * ts;
  else
    for (int64_t j = 0; j < n; ++j) o[j] = y[j] * (g[j] - ts);
}

template <bool kLog>
void kernel_softmax_bw_t(const KernelArgs& k) {
  Tensor g = cpu::contiguous_raw(k.in[0]), y = cpu::contiguous_raw(k.in[1]);
  RowLayout l = layout_of(y.shape(), k.attrs.i("dim"));
  visit_floating(y.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pg = g.impl()->data_as<T>();
    const T* py = y.impl()->data_as<T>();
    T* po = k.out[0].impl()->data_as<T>();
    const int64_t rows = l.outer * l.inner, n = l.n, st = l.inner;
    const int64_t grain = std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(n, 1));
    cpu::parallel_for(rows, grain, [&](int64_t b, int64_t e) {
      std::vector<double> prod(static_cast<size_t>(n));
      std::vector<T> rows3(st == 1 ? 0 : size_t(3 * n));  // a strided row, gathered
      for (int64_t r = b; r < e; ++r) {
        const int64_t base = (r / st) * n * st + r % st;
        if (st == 1) {
          softmax_bw_row<kLog>(pg + base, py + base, po + base, n, prod.data());
          continue;
        }
        T *tg = rows3.data(), *ty = tg + n, *to = ty + n;
        for (int64_t j = 0; j < n; ++j) tg[j] = pg[base + j * st], ty[j] = py[base + j * st];
        softmax_bw_row<kLog>(tg, ty, to, n, prod.data());
        for (int64_t j = 0; j < n; ++j) po[base + j * st] = to[j];
      }
    });
  });
}

std::vector<Tensor> grad_softmax(const GradArgs& g) {
  return {softmax_backward(g.grad_out[0], g.out[0], g.attrs.i("dim"))};
}
std::vector<Tensor> grad_log_softmax(const GradArgs& g) {
  return {log_softmax_backward(g.grad_out[0], g.out[0], g.attrs.i("dim"))};
}

// out = y * (go - sum(go * y)): linear in go (its adjoint is itself); d/dy from the product rule.
std::vector<Tensor> grad_softmax_bw(const GradArgs& a) {
  int64_t d = a.attrs.i("dim");
  const Tensor &v = a.grad_out[0], &go = a.in[0], &y = a.in[1];
  Tensor s = sum(mul(go, y), {d}, true);
  Tensor gg = softmax_backward(v, y, d);
  Tensor gy = sub(mul(v, sub(go, s)), mul(go, sum(mul(v, y), {d}, true)));
  return {gg, gy};
}
// out = go - p * sum(go) with p = exp(y).
std::vector<Tensor> grad_log_softmax_bw(const GradArgs& a) {
  int64_t d = a.attrs.i("dim");
  const Tensor &v = a.grad_out[0], &go = a.in[0], &y = a.in[1];
  Tensor p = exp(y);
  Tensor gg = sub(v, sum(mul(v, p), {d}, true));
  Tensor gy = neg(mul(mul(v, p), sum(go, {d}, true)));
  return {gg, gy};
}

const OpDef kSoftmax{.name = "softmax", .flags = kSaveOutputs, .infer = infer_softmax,
                     .kernel = kernel_softmax_t<false>, .grad = grad_softmax};
const OpDef kLogSoftmax{.name = "log_softmax", .flags = kSaveOutputs, .infer = infer_log_softmax,
                        .kernel = kernel_softmax_t<true>, .grad = grad_log_softmax};
const OpDef kSoftmaxBackward{.name = "softmax_backward", .flags = kSaveInputs, .infer = infer_softmax_bw,
                             .kernel = kernel_softmax_bw_t<false>, .grad = grad_softmax_bw};
const OpDef kLogSoftmaxBackward{.name = "log_softmax_backward", .flags = kSaveInputs, .infer = infer_log_softmax_bw,
                                .kernel = kernel_softmax_bw_t<true>, .grad = grad_log_softmax_bw};
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
