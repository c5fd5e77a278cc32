#include "terra/ops/reduce_stats.h"

#include <stdexcept>
#include <string>

#include "terra/backend/reduce_stats_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/core/errors.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/creation.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/reduce.h"
#include "terra/ops/views.h"

namespace terra {
namespace {

// ---- max/min over all elements ----
TensorMetas infer_extreme_all(const char* op, std::span<const Tensor> in) {
  if (in[0].numel() == 0)
    throw std::invalid_argument(std::string("[") + op + "] cannot reduce an empty tensor of shape " +
                                shape_str(in[0].shape()));
  return {{Shape{}, in[0].dtype()}};
}
TensorMetas infer_max_all(std::span<const Tensor> in, const Attrs&) { return infer_extreme_all("max", in); }
TensorMetas infer_min_all(std::span<const Tensor> in, const Attrs&) { return infer_extreme_all("min", in); }

// Ties share the gradient evenly (torch's rule for the full reduction).
TensorList grad_extreme_all(const GradArgs& g) {
  const Tensor& go = g.grad_out[0];
  Tensor m = eq(g.in[0], g.out[0]).to(go.dtype());
  return {mul(m, div(go, sum(m)))};
}
const OpDef kMaxAll{.name = "max_all", .flags = kSaveInputs | kSaveOutputs, .infer = infer_max_all,
                    .kernel = kernels::max_all, .grad = grad_extreme_all};
const OpDef kMinAll{.name = "min_all", .flags = kSaveInputs | kSaveOutputs, .infer = infer_min_all,
                    .kernel = kernels::min_all, .grad = grad_extreme_all};

// ---- max/min/argmax/argmin along one dim ----
TensorMetas infer_extreme_dim(const char* op, std::span<const Tensor> in, const Attrs& a) {
  const Shape& s = in[0].shape();
  int64_t dim = a.i("dim");
  if (dim < 0 || dim >= int64_t(s.size()))
    throw std::runtime_error(std::string("[") + op + "] internal: dim " + std::to_string(dim) + " not normalized");
  if (s[size_t(dim)] == 0)
    throw std::invalid_argument(std::string("[") + op + "] cannot reduce dim " + std::to_string(dim) +
                                " of size 0 in shape " + shape_str(s));
  return {{reduced_shape(s, {dim}, a.b("keepdim")), in[0].dtype()}};
}
TensorMetas infer_max_dim(std::span<const Tensor> in, const Attrs& a) {
  auto m = infer_extreme_dim("max", in, a);
  return {m[0], {m[0].shape, DType::Int64}};
}
TensorMetas infer_min_dim(std::span<const Tensor> in, const Attrs& a) {
  auto m = infer_extreme_dim("min", in, a);
  return {m[0], {m[0].shape, DType::Int64}};
}
TensorMetas infer_argmax(std::span<const Tensor> in, const Attrs& a) {
  return {{infer_extreme_dim("argmax", in, a)[0].shape, DType::Int64}};
}
TensorMetas infer_argmin(std::span<const Tensor> in, const Attrs& a) {
  return {{infer_extreme_dim("argmin", in, a)[0].shape, DType::Int64}};
}

// The gradient goes to the element the saved index names: a one-hot mask along `dim`.
TensorList grad_extreme_dim(const GradArgs& g) {
  int64_t dim = g.attrs.i("dim");
  const Shape& xs = g.in_meta[0].shape;
  Tensor go = g.grad_out[0], idx = g.out[1];
  if (!g.attrs.b("keepdim")) {
    go = unsqueeze(go, dim);
    idx = unsqueeze(idx, dim);
  }
  Shape ps(xs.size(), 1);
  ps[size_t(dim)] = xs[size_t(dim)];
  Tensor pos = reshape(arange(0, xs[size_t(dim)], 1, DType::Int64), ps);
  return {where(eq(pos, idx), go, 0.0)};
}
const OpDef kMaxDim{.name = "max_dim", .flags = kSaveOutputs, .infer = infer_max_dim,
                    .kernel = kernels::max_dim, .grad = grad_extreme_dim};
const OpDef kMinDim{.name = "min_dim", .flags = kSaveOutputs, .infer = infer_min_dim,
                    .kernel = kernels::min_dim, .grad = grad_extreme_dim};
const OpDef kArgmax{.name = "argmax", .flags = kNoGrad, .infer = infer_argmax,
                    .kernel = kernels::argmax};
const OpDef kArgmin{.name = "argmin", .flags = kNoGrad, .infer = infer_argmin,
                    .kernel = kernels::argmin};

// ---- var ----
TensorMetas infer_var(std::span<const Tensor> in, const Attrs& a) {
  if (!is_floating(in[0].dtype()))
    throw std::invalid_argument(std::string("[var] needs a floating tensor, got ") + dtype_name(in[0].dtype()) +
                                " of shape " + shape_str(in[0].shape()));
  return {{reduced_shape(in[0].shape(), a.ints("dims"), a.b("keepdim")), in[0].dtype()}};
}
TensorList grad_var(const GradArgs& g) {
  const Tensor& x = g.in[0];
  const auto& dims = g.attrs.ints("dims");
  const Shape& xs = g.in_meta[0].shape;
  int64_t n = 1;
  for (int64_t d : dims) n *= xs[size_t(d)];
  double ddof = g.attrs.b("unbiased") ? 1.0 : 0.0;
  Tensor go = g.grad_out[0];
  if (!g.attrs.b("keepdim")) go = reshape(go, reduced_shape(xs, dims, true));
  Tensor centered = sub(x, mean(x, dims, true));
  return {mul(mul(centered, go), 2.0 / (double(n) - ddof))};
}
const OpDef kVar{.name = "var", .flags = kSaveInputs, .infer = infer_var, .kernel = kernels::var, .grad = grad_var};

OpRegistrar r1(kMaxAll), r2(kMinAll), r3(kMaxDim), r4(kMinDim), r5(kArgmax), r6(kArgmin), r7(kVar);

// A 0-d tensor reduces along its (virtual) dim 0 as a 1-element vector, as torch.
Tensor extreme_dim(const OpDef& op, const char* name, const Tensor& x, int64_t dim, bool keepdim, size_t out) {
  need_defined(name, x);
  dim = wrap_dim(name, dim, x.dim());
  if (x.dim() == 0) return dispatch(op, {reshape(x, {1})}, Attrs{{"dim", int64_t(0)}, {"keepdim", false}})[out];
  return dispatch(op, {x}, Attrs{{"dim", dim}, {"keepdim", keepdim}})[out];
}
Tensor arg_flat(const OpDef& op, const char* name, const Tensor& x) {
  need_defined(name, x);
  if (x.numel() == 0)
    throw std::invalid_argument(std::string("[") + name + "] cannot reduce an empty tensor of shape " +
                                shape_str(x.shape()));
  return dispatch1(op, {reshape(x, {x.numel()})}, Attrs{{"dim", int64_t(0)}, {"keepdim", false}});
}

}  // namespace

Tensor max(const Tensor& x) { need_defined("max", x); return dispatch1(kMaxAll, {x}); }
Tensor min(const Tensor& x) { need_defined("min", x); return dispatch1(kMinAll, {x}); }
Tensor max(const Tensor& x, int64_t dim, bool keepdim) { return extreme_dim(kMaxDim, "max", x, dim, keepdim, 0); }
Tensor min(const Tensor& x, int64_t dim, bool keepdim) { return extreme_dim(kMinDim, "min", x, dim, keepdim, 0); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(kArgmax, "argmax", x, dim, keepdim, 0);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(kArgmin, "argmin", x, dim, keepdim, 0);
}
Tensor argmax(const Tensor& x) { return arg_flat(kArgmax, "argmax", x); }
Tensor argmin(const Tensor& x) { return arg_flat(kArgmin, "argmin", x); }

Tensor var(const Tensor& x, std::vector<int64_t> dims, bool unbiased, bool keepdim) {
  need_defined("var", x);
  dims = reduction_dims("var", std::move(dims), x.dim());
  return dispatch1(kVar, {x}, Attrs{{"dims", dims}, {"unbiased", unbiased}, {"keepdim", keepdim}});
}
Tensor std_(const Tensor& x, std::vector<int64_t> dims, bool unbiased, bool keepdim) {
  need_defined("std_", x);
  return sqrt(var(x, std::move(dims), unbiased, keepdim));
}

}  // namespace terra
