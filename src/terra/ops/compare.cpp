// Comparisons (bool results), logical ops, where, masked_fill and the comparison operators.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "terra/backend/cpu/loops.h"
#include "terra/core/dispatch.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/reduce.h"

namespace terra {
namespace {

void need(const char* op, const Tensor& x, int k) {
  if (!x.defined()) throw std::invalid_argument(std::string("[") + op + "] input " + std::to_string(k) + " is undefined");
}

TensorMetas infer_compare(const char* op, std::span<const Tensor> in) {
  if (in[0].dtype() != in[1].dtype())
    throw std::invalid_argument(std::string("[") + op + "] dtypes " + dtype_name(in[0].dtype()) + " and " +
                                dtype_name(in[1].dtype()) + " differ (shapes " + shape_str(in[0].shape()) +
                                " and " + shape_str(in[1].shape()) + ")");
  return {{broadcast_shapes(op, in[0].shape(), in[1].shape()), DType::Bool}};
}

template <class F>
void compare_kernel(const KernelArgs& k, F f) {
  visit_dtype(k.in[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::binary_loop<T, T, bool>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                                 [&](T a, T b) { return bool(f(a, b)); });
  });
}

#define TERRA_COMPARE(NAME, EXPR)                                                                        \
  TensorMetas infer_##NAME(std::span<const Tensor> in, const Attrs&) {                       \
    return infer_compare(#NAME, in);                                                                     \
  }                                                                                                      \
  void kernel_##NAME(const KernelArgs& k) { compare_kernel(k, [](auto a, auto b) { return EXPR; }); }    \
  const OpDef k_##NAME{.name = #NAME, .flags = kElementwise | kNoGrad, .infer = infer_##NAME,            \
                       .kernel = kernel_##NAME};                                                         \
  OpRegistrar reg_##NAME(k_##NAME);

TERRA_COMPARE(eq, a == b)
TERRA_COMPARE(ne, a != b)
TERRA_COMPARE(lt, a < b)
TERRA_COMPARE(le, a <= b)
TERRA_COMPARE(gt, a > b)
TERRA_COMPARE(ge, a >= b)
#undef TERRA_COMPARE

Tensor compare(const OpDef& op, Tensor a, Tensor b) {
  need(op.name, a, 0);
  need(op.name, b, 1);
  promote_pair(a, b);
  return dispatch1(op, {std::move(a), std::move(b)});
}
Tensor compare(const OpDef& op, const Tensor& a, double b) {
  need(op.name, a, 0);
  return compare(op, a, scalar_like(a, b));
}

// ---- logical ----
TensorMetas infer_logical_not(std::span<const Tensor> in, const Attrs&) {
  return {{in[0].shape(), DType::Bool}};
}
void kernel_logical_not(const KernelArgs& k) {
  visit_dtype(k.in[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::unary_loop<T, bool>(*k.in[0].impl(), *k.out[0].impl(), [](T a) { return a == T(0); });
  });
}
const OpDef kLogicalNot{.name = "logical_not", .flags = kElementwise | kNoGrad, .infer = infer_logical_not,
                        .kernel = kernel_logical_not};

TensorMetas infer_logical(const char* op, std::span<const Tensor> in) {
  if (in[0].dtype() != DType::Bool || in[1].dtype() != DType::Bool)
    throw std::runtime_error(std::string("[") + op + "] internal: operands must be cast to bool first");
  return {{broadcast_shapes(op, in[0].shape(), in[1].shape()), DType::Bool}};
}
TensorMetas infer_logical_and(std::span<const Tensor> in, const Attrs&) { return infer_logical("logical_and", in); }
TensorMetas infer_logical_or(std::span<const Tensor> in, const Attrs&) { return infer_logical("logical_or", in); }
void kernel_logical_and(const KernelArgs& k) {
  cpu::binary_loop<bool, bool, bool>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                                     [](bool a, bool b) { return bool(a & b); });
}
void kernel_logical_or(const KernelArgs& k) {
  cpu::binary_loop<bool, bool, bool>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                                     [](bool a, bool b) { return bool(a | b); });
}
const OpDef kLogicalAnd{.name = "logical_and", .flags = kElementwise | kNoGrad, .infer = infer_logical_and,
                        .kernel = kernel_logical_and};
const OpDef kLogicalOr{.name = "logical_or", .flags = kElementwise | kNoGrad, .infer = infer_logical_or,
                       .kernel = kernel_logical_or};
OpRegistrar r1(kLogicalNot), r2(kLogicalAnd), r3(kLogicalOr);

Tensor as_bool(const Tensor& x) { return x.dtype() == DType::Bool ? x : x.to(DType::Bool); }

// ---- where ----
[[noreturn]] void bad_condition(const char* op, const Tensor& c) {
  throw std::invalid_argument(std::string("[") + op + "] condition must be bool, got " + dtype_name(c.dtype()) +
                              " of shape " + shape_str(c.shape()));
}

TensorMetas infer_where(std::span<const Tensor> in, const Attrs&) {
  if (in[0].dtype() != DType::Bool) bad_condition("where", in[0]);
  if (in[1].dtype() != in[2].dtype())
    throw std::invalid_argument(std::string("[where] dtypes ") + dtype_name(in[1].dtype()) + " and " +
                                dtype_name(in[2].dtype()) + " differ");
  Shape s = broadcast_shapes("where", in[0].shape(), in[1].shape());
  try {
    s = broadcast_shapes("where", s, in[2].shape());
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("[where] shapes " + shape_str(in[0].shape()) + " (condition), " +
                                shape_str(in[1].shape()) + " and " + shape_str(in[2].shape()) +
                                " cannot be broadcast together");
  }
  return {{s, in[1].dtype()}};
}

// One select per element; a scalar side is read once. Pointers and scalars are the loop's own locals:
// read through the closure, they would be reloaded after every store (which may alias the closure),
// and the loop would stay scalar and branchy.
template <class T, bool ScalarA, bool ScalarB>
void where_dense(const uint8_t* pc, const T* pa, const T* pb, T* po, int64_t n) {
  cpu::parallel_for(n, cpu::kGrain, [pc, pa, pb, po](int64_t s, int64_t e) {
    const uint8_t* c = pc;
    const T *a = pa, *b = pb;
    T* o = po;
    const T va = ScalarA ? a[0] : T(), vb = ScalarB ? b[0] : T();
    for (int64_t i = s; i < e; ++i) {
      const T x = ScalarA ? va : a[i], y = ScalarB ? vb : b[i];  // both loaded: a select, not a branch
      o[i] = c[i] != 0 ? x : y;
    }
  });
}

void kernel_where(const KernelArgs& k) {
  TensorImpl &c = *k.in[0].impl(), &a = *k.in[1].impl(), &b = *k.in[2].impl(), &o = *k.out[0].impl();
  const int64_t n = o.numel;
  visit_dtype(o.dtype, [&](auto z) {
    using T = decltype(z);
    // Mask read as bytes compared with 0: GCC vectorizes that select, not one on a loaded bool.
    const uint8_t* pc = c.data_as<uint8_t>();
    const T* pa = a.data_as<T>();
    const T* pb = b.data_as<T>();
    T* po = o.data_as<T>();
    // Contiguous fast paths for the common forms: where(c, x, y), where(c, x, 0), where(c, 0, x).
    if (cpu::dense(c, n) && o.is_contiguous()) {
      if (cpu::dense(a, n) && cpu::dense(b, n)) return where_dense<T, false, false>(pc, pa, pb, po, n);
      if (cpu::dense(a, n) && b.numel == 1) return where_dense<T, false, true>(pc, pa, pb, po, n);
      if (a.numel == 1 && cpu::dense(b, n)) return where_dense<T, true, false>(pc, pa, pb, po, n);
    }
    cpu::ternary_loop<bool, T, T, T>(c, a, b, o, [](bool m, T x, T y) { return m ? x : y; });
  });
}

std::vector<Tensor> grad_where(const GradArgs& g) {
  const Tensor &c = g.in[0], &go = g.grad_out[0];
  return {Tensor(), sum_to(where(c, go, 0.0), g.in_meta[1].shape), sum_to(where(c, 0.0, go), g.in_meta[2].shape)};
}
const OpDef kWhere{.name = "where", .flags = kElementwise | kSaveInputs, .infer = infer_where,
                   .kernel = kernel_where, .grad = grad_where};

// ---- masked_fill ----
TensorMetas infer_masked_fill(std::span<const Tensor> in, const Attrs&) {
  const Tensor &x = in[0], &m = in[1];
  if (m.dtype() != DType::Bool)
    throw std::invalid_argument(std::string("[masked_fill] mask must be bool, got ") + dtype_name(m.dtype()) +
                                " of shape " + shape_str(m.shape()));
  Shape s = broadcast_shapes("masked_fill", x.shape(), m.shape());
  if (s != x.shape())
    throw std::invalid_argument("[masked_fill] mask of shape " + shape_str(m.shape()) +
                                " does not broadcast to the input's shape " + shape_str(x.shape()));
  return {{x.shape(), x.dtype()}};
}
void kernel_masked_fill(const KernelArgs& k) {
  double v = k.attrs.f("value");
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    const T val = static_cast<T>(v);
    cpu::binary_loop<T, uint8_t, T>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                                    [val](T a, uint8_t m) { return m != 0 ? val : a; });
  });
}
std::vector<Tensor> grad_masked_fill(const GradArgs& g) {
  return {where(g.in[1], 0.0, g.grad_out[0]), Tensor()};
}
const OpDef kMaskedFill{.name = "masked_fill", .flags = kElementwise | kSaveInputs, .infer = infer_masked_fill,
                        .kernel = kernel_masked_fill, .grad = grad_masked_fill};
OpRegistrar r4(kWhere), r5(kMaskedFill);

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(k_eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(k_ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(k_lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(k_le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(k_gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(k_ge, a, b); }
Tensor eq(const Tensor& a, double b) { return compare(k_eq, a, b); }
Tensor ne(const Tensor& a, double b) { return compare(k_ne, a, b); }
Tensor lt(const Tensor& a, double b) { return compare(k_lt, a, b); }
Tensor le(const Tensor& a, double b) { return compare(k_le, a, b); }
Tensor gt(const Tensor& a, double b) { return compare(k_gt, a, b); }
Tensor ge(const Tensor& a, double b) { return compare(k_ge, a, b); }

Tensor logical_not(const Tensor& x) { return dispatch1(kLogicalNot, {x}); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  need("logical_and", a, 0);
  need("logical_and", b, 1);
  return dispatch1(kLogicalAnd, {as_bool(a), as_bool(b)});
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  need("logical_or", a, 0);
  need("logical_or", b, 1);
  return dispatch1(kLogicalOr, {as_bool(a), as_bool(b)});
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  need("where", cond, 0);
  need("where", a, 1);
  need("where", b, 2);
  if (cond.dtype() != DType::Bool) bad_condition("where", cond);
  Tensor x = a, y = b;
  promote_pair(x, y);
  return dispatch1(kWhere, {cond, std::move(x), std::move(y)});
}
Tensor where(const Tensor& cond, const Tensor& a, double b) {
  need("where", a, 1);
  return where(cond, a, scalar_like(a, b));
}
Tensor where(const Tensor& cond, double a, const Tensor& b) {
  need("where", b, 2);
  return where(cond, scalar_like(b, a), b);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  need("masked_fill", x, 0);
  need("masked_fill", mask, 1);
  return dispatch1(kMaskedFill, {x, mask}, Attrs{{"value", value}});  // keeps x's dtype, as torch
}

Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, double b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, double b) { return ne(a, b); }
Tensor operator<(const Tensor& a, double b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, double b) { return le(a, b); }
Tensor operator>(const Tensor& a, double b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, double b) { return ge(a, b); }

}  // namespace terra
