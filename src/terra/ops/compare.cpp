// Comparisons (bool results), logical ops, where, masked_fill and the comparison operators.
#include <stdexcept>
#include <string>

#include "terra/backend/compare_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/core/errors.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/elementwise.h"
#include "terra/ops/reduce.h"

namespace terra {
namespace {

TensorMetas infer_compare(const char* op, std::span<const Tensor> in) {
  if (in[0].dtype() != in[1].dtype())
    throw std::invalid_argument(std::string("[") + op + "] dtypes " + dtype_name(in[0].dtype()) + " and " +
                                dtype_name(in[1].dtype()) + " differ (shapes " + shape_str(in[0].shape()) +
                                " and " + shape_str(in[1].shape()) + ")");
  return {{broadcast_shapes(op, in[0].shape(), in[1].shape()), DType::Bool}};
}

#define TERRA_COMPARE(NAME)                                                                              \
  TensorMetas infer_##NAME(std::span<const Tensor> in, const Attrs&) {                       \
    return infer_compare(#NAME, in);                                                                     \
  }                                                                                                      \
  const OpDef k_##NAME{.name = #NAME, .flags = kElementwise | kNoGrad, .infer = infer_##NAME,            \
                       .kernel = kernels::NAME};                                                         \
  OpRegistrar reg_##NAME(k_##NAME);

TERRA_COMPARE(eq)
TERRA_COMPARE(ne)
TERRA_COMPARE(lt)
TERRA_COMPARE(le)
TERRA_COMPARE(gt)
TERRA_COMPARE(ge)
#undef TERRA_COMPARE

Tensor compare(const OpDef& op, Tensor a, Tensor b) {
  need_defined(op.name, a, 0);
  need_defined(op.name, b, 1);
  promote_pair(a, b);
  return dispatch1(op, {std::move(a), std::move(b)});
}
Tensor compare(const OpDef& op, const Tensor& a, double b) {
  need_defined(op.name, a, 0);
  return compare(op, a, scalar_like(a, b));
}

// ---- logical ----
TensorMetas infer_logical_not(std::span<const Tensor> in, const Attrs&) {
  return {{in[0].shape(), DType::Bool}};
}
const OpDef kLogicalNot{.name = "logical_not", .flags = kElementwise | kNoGrad, .infer = infer_logical_not,
                        .kernel = kernels::logical_not};

TensorMetas infer_logical(const char* op, std::span<const Tensor> in) {
  if (in[0].dtype() != DType::Bool || in[1].dtype() != DType::Bool)
    throw std::runtime_error(std::string("[") + op + "] internal: operands must be cast to bool first");
  return {{broadcast_shapes(op, in[0].shape(), in[1].shape()), DType::Bool}};
}
TensorMetas infer_logical_and(std::span<const Tensor> in, const Attrs&) { return infer_logical("logical_and", in); }
TensorMetas infer_logical_or(std::span<const Tensor> in, const Attrs&) { return infer_logical("logical_or", in); }
const OpDef kLogicalAnd{.name = "logical_and", .flags = kElementwise | kNoGrad, .infer = infer_logical_and,
                        .kernel = kernels::logical_and};
const OpDef kLogicalOr{.name = "logical_or", .flags = kElementwise | kNoGrad, .infer = infer_logical_or,
                       .kernel = kernels::logical_or};
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

TensorList grad_where(const GradArgs& g) {
  const Tensor &c = g.in[0], &go = g.grad_out[0];
  return {Tensor(), sum_to(where(c, go, 0.0), g.in_meta[1].shape), sum_to(where(c, 0.0, go), g.in_meta[2].shape)};
}
const OpDef kWhere{.name = "where", .flags = kElementwise | kSaveInputs, .infer = infer_where,
                   .kernel = kernels::where, .grad = grad_where};

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
TensorList grad_masked_fill(const GradArgs& g) {
  return {where(g.in[1], 0.0, g.grad_out[0]), Tensor()};
}
const OpDef kMaskedFill{.name = "masked_fill", .flags = kElementwise | kSaveInputs, .infer = infer_masked_fill,
                        .kernel = kernels::masked_fill, .grad = grad_masked_fill};
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
  need_defined("logical_and", a, 0);
  need_defined("logical_and", b, 1);
  return dispatch1(kLogicalAnd, {as_bool(a), as_bool(b)});
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  need_defined("logical_or", a, 0);
  need_defined("logical_or", b, 1);
  return dispatch1(kLogicalOr, {as_bool(a), as_bool(b)});
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  need_defined("where", cond, 0);
  need_defined("where", a, 1);
  need_defined("where", b, 2);
  if (cond.dtype() != DType::Bool) bad_condition("where", cond);
  Tensor x = a, y = b;
  promote_pair(x, y);
  return dispatch1(kWhere, {cond, std::move(x), std::move(y)});
}
Tensor where(const Tensor& cond, const Tensor& a, double b) {
  need_defined("where", a, 1);
  return where(cond, a, scalar_like(a, b));
}
Tensor where(const Tensor& cond, double a, const Tensor& b) {
  need_defined("where", b, 2);
  return where(cond, scalar_like(b, a), b);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  need_defined("masked_fill", x, 0);
  need_defined("masked_fill", mask, 1);
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
