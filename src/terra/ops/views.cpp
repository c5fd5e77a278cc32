#include "terra/ops/views.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "terra/backend/views_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/core/errors.h"
#include "terra/core/object_pool.h"
#include "terra/ops/reduce.h"

namespace terra {
namespace {

Tensor make_view(const Tensor& in, Shape shape, Shape strides, int64_t offset) {
  auto v = make_pooled<TensorImpl>();
  TensorImpl* src = in.impl();
  v->numel = numel_of(shape);
  v->shape = std::move(shape);
  v->strides = std::move(strides);
  v->offset = offset;
  v->dtype = src->dtype;
  {
    auto g = lock_if_awaiting(*src);  // a placeholder another thread may be reading first
    v->storage = src->storage;  // graph modes give host-side views of placeholders their own pending value
  }
  v->base = src->base ? src->base : in.impl_ptr();
  return Tensor(std::move(v));
}

Shape resolve_shape(const char* op, const Shape& in, Shape s) {
  int64_t infer_at = -1, known = 1, bound = 1;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == -1) {
      if (infer_at >= 0) op_error(op, "only one dimension can be -1 in " + shape_str(s));
      infer_at = int64_t(d);
    } else if (s[d] < 0) {
      op_error(op, "invalid dimension in shape " + shape_str(s));
    } else {
      // Zero dims count as 1 in the bound, as in numel_of: no dim product of a shape overflows.
      if (__builtin_mul_overflow(bound, std::max<int64_t>(s[d], 1), &bound))
        op_error(op, "shape " + shape_str(s) + " has more elements than int64 can count");
      known *= s[d];
    }
  }
  int64_t n = numel_of(op, in);
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0)
      op_error(op, "shape " + shape_str(s) + " is invalid for input of shape " + shape_str(in));
    s[size_t(infer_at)] = n / known;
  }
  if (numel_of(op, s) != n) op_error(op, "shape " + shape_str(s) + " is invalid for input of shape " + shape_str(in));
  return s;
}

// Strides that let `shape` view memory laid out as (old, old_st), if any (torch's rule).
std::optional<Shape> view_strides(const Shape& old, const Shape& old_st, const Shape& shape) {
  if (old.empty() || numel_of(old) == 0) return contiguous_strides(shape);
  Shape st(shape.size(), 1);
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base = old_st.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(old.size()) - 1; d >= 0; --d) {
    tensor_numel *= old[size_t(d)];
    if (d == 0 || (old[size_t(d - 1)] != 1 && old_st[size_t(d - 1)] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[size_t(view_d)] == 1)) {
        st[size_t(view_d)] = view_numel * chunk_base;
        view_numel *= shape[size_t(view_d)];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = old_st[size_t(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

// ---- view
TensorMetas infer_view(std::span<const Tensor> in, const Attrs& a) {
  const Shape& s = a.ints("shape");
  check_shape("view", s);
  if (numel_of("view", s) != in[0].numel())
    op_error("view", "shape " + shape_str(s) + " is invalid for input of shape " + shape_str(in[0].shape()));
  if (!view_strides(in[0].shape(), in[0].strides(), s))
    op_error("view", "shape " + shape_str(s) + " is not compatible with the input's strides " +
                         shape_str(in[0].strides()) + " (shape " + shape_str(in[0].shape()) + "); use reshape");
  return {{s, in[0].dtype()}};
}
Tensor view_view(const Tensor& x, const Attrs& a) {
  const Shape& s = a.ints("shape");
  return make_view(x, s, *view_strides(x.shape(), x.strides(), s), x.impl()->offset);
}
TensorList grad_view(const GradArgs& g) { return {reshape(g.grad_out[0], g.in_meta[0].shape)}; }
const OpDef kViewOp{.name = "view", .flags = kView, .infer = infer_view, .view = view_view, .grad = grad_view};

// ---- permute
TensorMetas infer_permute(std::span<const Tensor> in, const Attrs& a) {
  const auto& p = a.ints("dims");
  int64_t r = in[0].dim();
  if (int64_t(p.size()) != r)
    op_error("permute", "got " + std::to_string(p.size()) + " dims for a tensor of shape " + shape_str(in[0].shape()));
  std::vector<bool> seen(size_t(r), false);
  Shape s(static_cast<size_t>(r));
  for (int64_t d = 0; d < r; ++d) {
    int64_t q = p[size_t(d)];
    if (q < 0 || q >= r || seen[size_t(q)])
      op_error("permute", "dims " + shape_str(p) + " are not a permutation of rank " + std::to_string(r));
    seen[size_t(q)] = true;
    s[size_t(d)] = in[0].shape()[size_t(q)];
  }
  return {{s, in[0].dtype()}};
}
Tensor view_permute(const Tensor& x, const Attrs& a) {
  const auto& p = a.ints("dims");
  Shape s(p.size()), st(p.size());
  for (size_t d = 0; d < p.size(); ++d) {
    s[d] = x.shape()[size_t(p[d])];
    st[d] = x.strides()[size_t(p[d])];
  }
  return make_view(x, s, st, x.impl()->offset);
}
TensorList grad_permute(const GradArgs& g) {
  const auto& p = g.attrs.ints("dims");
  std::vector<int64_t> inv(p.size());
  for (size_t d = 0; d < p.size(); ++d) inv[size_t(p[d])] = int64_t(d);
  return {permute(g.grad_out[0], inv)};
}
const OpDef kPermute{.name = "permute", .flags = kView, .infer = infer_permute, .view = view_permute,
                     .grad = grad_permute};

// ---- slice (dim, start, end, step already normalized to the input)
// Elements in [st, en) taken every `step`, without the (en - st + step - 1) that overflows for a huge step.
int64_t slice_len(int64_t st, int64_t en, int64_t step) { return en > st ? (en - st - 1) / step + 1 : 0; }

void check_slice(const char* op, const Shape& s, const Attrs& a) {
  int64_t d = a.i("dim"), st = a.i("start"), en = a.i("end"), step = a.i("step");
  if (d < 0 || d >= int64_t(s.size()))
    op_error(op, "dim " + std::to_string(d) + " is out of range for shape " + shape_str(s));
  int64_t n = s[size_t(d)];
  if (step <= 0 || st < 0 || st > n || en < st || en > n)
    op_error(op, "range [" + std::to_string(st) + ", " + std::to_string(en) + ") step " + std::to_string(step) +
                     " is out of bounds for dim " + std::to_string(d) + " of shape " + shape_str(s));
}

TensorMetas infer_slice(std::span<const Tensor> in, const Attrs& a) {
  Shape s = in[0].shape();
  check_slice("slice", s, a);
  int64_t d = a.i("dim");
  s[size_t(d)] = slice_len(a.i("start"), a.i("end"), a.i("step"));
  return {{s, in[0].dtype()}};
}
Tensor view_slice(const Tensor& x, const Attrs& a) {
  int64_t d = a.i("dim"), st = a.i("start"), en = a.i("end"), step = a.i("step");
  Shape s = x.shape(), str = x.strides();
  s[size_t(d)] = slice_len(st, en, step);
  int64_t off = x.impl()->offset + st * str[size_t(d)];
  // With one element the stride is never used, and stride * a huge step would overflow.
  if (s[size_t(d)] > 1) str[size_t(d)] *= step;
  return make_view(x, s, str, off);
}

TensorMetas infer_slice_backward(std::span<const Tensor> in, const Attrs& a) {
  const Shape& s = a.ints("in_shape");
  check_shape("slice_backward", s);
  check_slice("slice_backward", s, a);
  Shape g = s;
  g[size_t(a.i("dim"))] = slice_len(a.i("start"), a.i("end"), a.i("step"));
  if (in[0].shape() != g)
    op_error("slice_backward", "gradient of shape " + shape_str(in[0].shape()) + " does not match the slice of shape " +
                                   shape_str(g) + " of " + shape_str(s));
  return {{s, in[0].dtype()}};
}
// The slice's region of the output is a view (view_slice, made here); the backend zeroes the output
// and copies the gradient into the region.
void kernel_slice_backward(const KernelArgs& k) {
  Tensor region = view_slice(k.out[0], k.attrs);
  kernels::slice_backward(k.in[0], k.out[0], region);
}
TensorList grad_slice_backward(const GradArgs& g) {
  const Attrs& a = g.attrs;
  return {slice(g.grad_out[0], a.i("dim"), a.i("start"), a.i("end"), a.i("step"))};
}
const OpDef kSliceBackward{.name = "slice_backward", .flags = 0, .infer = infer_slice_backward,
                           .kernel = kernel_slice_backward, .grad = grad_slice_backward};
Tensor slice_backward(const Tensor& g, const Shape& in_shape, const Attrs& a) {
  Attrs b = a;
  b.set("in_shape", in_shape);
  return dispatch1(kSliceBackward, {g}, b);
}
TensorList grad_slice(const GradArgs& g) {
  return {slice_backward(g.grad_out[0], g.in_meta[0].shape, g.attrs)};
}
const OpDef kSlice{.name = "slice", .flags = kView, .infer = infer_slice, .view = view_slice, .grad = grad_slice};

// ---- expand
TensorMetas infer_expand(std::span<const Tensor> in, const Attrs& a) {
  const Shape& want = a.ints("shape");
  const Shape& have = in[0].shape();
  if (want.size() < have.size())
    op_error("expand", "cannot expand shape " + shape_str(have) + " to " + shape_str(want));
  Shape s(want.size());
  size_t off = want.size() - have.size();
  for (size_t d = 0; d < want.size(); ++d) {
    int64_t h = d < off ? 1 : have[d - off];
    int64_t w = want[d] == -1 ? h : want[d];
    if (d < off && want[d] == -1) op_error("expand", "-1 is not allowed for a new leading dim in " + shape_str(want));
    if (w < 0) op_error("expand", "invalid size " + std::to_string(want[d]) + " in shape " + shape_str(want));
    if (h != w && h != 1) op_error("expand", "cannot expand shape " + shape_str(have) + " to " + shape_str(want));
    s[d] = w;
  }
  return {{s, in[0].dtype()}};
}
Tensor view_expand(const Tensor& x, const Attrs& a) {
  Shape s = infer_expand(std::span<const Tensor>(&x, 1), a)[0].shape;
  Shape st(s.size(), 0);
  size_t off = s.size() - size_t(x.dim());
  for (size_t d = off; d < s.size(); ++d)
    st[d] = x.shape()[d - off] == s[d] ? x.strides()[d - off] : 0;
  return make_view(x, s, st, x.impl()->offset);
}
TensorList grad_expand(const GradArgs& g) { return {sum_to(g.grad_out[0], g.in_meta[0].shape)}; }
const OpDef kExpand{.name = "expand", .flags = kView, .infer = infer_expand, .view = view_expand,
                    .grad = grad_expand};

// ---- copy (contiguous / clone) and cast
TensorMetas infer_copy(std::span<const Tensor> in, const Attrs&) {
  return {{in[0].shape(), in[0].dtype()}};
}
TensorList grad_copy(const GradArgs& g) { return {g.grad_out[0]}; }
const OpDef kCopy{.name = "copy", .flags = kElementwise, .infer = infer_copy, .kernel = kernels::copy,
                  .grad = grad_copy};

TensorMetas infer_cast(std::span<const Tensor> in, const Attrs& a) {
  return {{in[0].shape(), a.dtype("dtype")}};
}
TensorList grad_cast(const GradArgs& g) {
  DType d = g.in_meta[0].dtype;
  if (!is_floating(d)) return {Tensor()};
  return {cast(g.grad_out[0], d)};
}
const OpDef kCast{.name = "cast", .flags = kElementwise, .infer = infer_cast, .kernel = kernels::copy,
                  .grad = grad_cast};

OpRegistrar r1(kViewOp), r2(kPermute), r3(kSlice), r4(kSliceBackward), r5(kExpand), r6(kCopy), r7(kCast);

}  // namespace

Tensor view(const Tensor& x, Shape shape) {
  if (!x.defined()) op_error("view", "input is undefined");
  return dispatch1(kViewOp, {x}, Attrs{{"shape", resolve_shape("view", x.shape(), std::move(shape))}});
}

Tensor reshape(const Tensor& x, Shape shape) {
  if (!x.defined()) op_error("reshape", "input is undefined");
  Shape s = resolve_shape("reshape", x.shape(), std::move(shape));
  if (s == x.shape()) return x;
  if (view_strides(x.shape(), x.strides(), s)) return dispatch1(kViewOp, {x}, Attrs{{"shape", s}});
  return dispatch1(kViewOp, {clone(x)}, Attrs{{"shape", s}});
}

Tensor permute(const Tensor& x, std::vector<int64_t> dims) {
  if (!x.defined()) op_error("permute", "input is undefined");
  for (auto& d : dims) d = wrap_dim("permute", d, x.dim());
  return dispatch1(kPermute, {x}, Attrs{{"dims", dims}});
}

Tensor transpose(const Tensor& x, int64_t a, int64_t b) {
  if (!x.defined()) op_error("transpose", "input is undefined");
  int64_t r = x.dim();
  if (r < 2 && (a == b || r == 0)) {
    wrap_dim("transpose", a, r);
    wrap_dim("transpose", b, r);
    return x;
  }
  a = wrap_dim("transpose", a, r);
  b = wrap_dim("transpose", b, r);
  std::vector<int64_t> p(static_cast<size_t>(r));
  for (int64_t d = 0; d < r; ++d) p[size_t(d)] = d;
  std::swap(p[size_t(a)], p[size_t(b)]);
  return dispatch1(kPermute, {x}, Attrs{{"dims", p}});
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (!x.defined()) op_error("slice", "input is undefined");
  if (x.dim() == 0) op_error("slice", "cannot slice a 0-d tensor");
  dim = wrap_dim("slice", dim, x.dim());
  if (step <= 0) op_error("slice", "step must be positive, got " + std::to_string(step));
  int64_t n = x.shape()[size_t(dim)];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  return dispatch1(kSlice, {x}, Attrs{{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  if (!x.defined()) op_error("select", "input is undefined");
  dim = wrap_dim("select", dim, x.dim());
  int64_t n = x.shape()[size_t(dim)];
  if (index < -n || index >= n)
    op_error("select", "index " + std::to_string(index) + " is out of range for dim " + std::to_string(dim) +
                           " of shape " + shape_str(x.shape()));
  if (index < 0) index += n;
  return squeeze(slice(x, dim, index, index + 1), dim);
}

Tensor expand(const Tensor& x, Shape shape) {
  if (!x.defined()) op_error("expand", "input is undefined");
  if (shape == x.shape()) return x;
  return dispatch1(kExpand, {x}, Attrs{{"shape", shape}});
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  if (!x.defined()) op_error("squeeze", "input is undefined");
  if (x.dim() == 0) return x;
  dim = wrap_dim("squeeze", dim, x.dim());
  if (x.shape()[size_t(dim)] != 1) return x;
  Shape s = x.shape();
  s.erase(s.begin() + dim);
  return dispatch1(kViewOp, {x}, Attrs{{"shape", s}});
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  if (!x.defined()) op_error("unsqueeze", "input is undefined");
  dim = wrap_dim("unsqueeze", dim, x.dim() + 1);
  Shape s = x.shape();
  s.insert(s.begin() + dim, 1);
  return dispatch1(kViewOp, {x}, Attrs{{"shape", s}});
}

Tensor flatten(const Tensor& x, int64_t start, int64_t end) {
  if (!x.defined()) op_error("flatten", "input is undefined");
  if (x.dim() == 0) return reshape(x, {1});
  start = wrap_dim("flatten", start, x.dim());
  end = wrap_dim("flatten", end, x.dim());
  if (start > end)
    op_error("flatten", "start dim " + std::to_string(start) + " is after end dim " + std::to_string(end));
  Shape s;
  for (int64_t d = 0; d < start; ++d) s.push_back(x.shape()[size_t(d)]);
  int64_t m = 1;
  for (int64_t d = start; d <= end; ++d) m *= x.shape()[size_t(d)];
  s.push_back(m);
  for (int64_t d = end + 1; d < x.dim(); ++d) s.push_back(x.shape()[size_t(d)]);
  return reshape(x, s);
}

Tensor contiguous(const Tensor& x) {
  if (!x.defined()) op_error("contiguous", "input is undefined");
  return x.is_contiguous() ? x : dispatch1(kCopy, {x});
}
Tensor clone(const Tensor& x) { return dispatch1(kCopy, {x}); }
Tensor cast(const Tensor& x, DType dtype) {
  if (!x.defined()) op_error("cast", "input is undefined");
  if (x.dtype() == dtype) return x;
  return dispatch1(kCast, {x}, Attrs{{"dtype", dtype}});
}

}  // namespace terra
