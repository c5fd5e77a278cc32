#include "terra/ops/arithmetic.h"

#include <stdexcept>
#include <string>
#include <type_traits>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/tile_loops.h"
#include "terra/backend/cpu/vector_math.h"
#include "terra/core/dispatch.h"
#include "terra/ops/creation.h"
#include "terra/ops/reduce.h"
#include "terra/ops/views.h"

namespace terra {
namespace {

TensorMetas infer_binary(const char* op, std::span<const Tensor> in) {
  if (in[0].dtype() != in[1].dtype())
    throw std::invalid_argument(std::string("[") + op + "] dtypes " + dtype_name(in[0].dtype()) + " and " +
                                dtype_name(in[1].dtype()) + " differ");
  return {{broadcast_shapes(op, in[0].shape(), in[1].shape()), in[0].dtype()}};
}

// In-place: `other` must broadcast to self's shape; self keeps its dtype.
TensorMetas infer_inplace(const char* op, std::span<const Tensor> in) {
  Shape s = broadcast_shapes(op, in[0].shape(), in[1].shape());
  if (s != in[0].shape())
    throw std::invalid_argument(std::string("[") + op + "] cannot broadcast " + shape_str(in[1].shape()) +
                                " into the in-place target of shape " + shape_str(in[0].shape()));
  if (in[0].dtype() != in[1].dtype())
    throw std::invalid_argument(std::string("[") + op + "] dtypes " + dtype_name(in[0].dtype()) + " and " +
                                dtype_name(in[1].dtype()) + " differ");
  return {{in[0].shape(), in[0].dtype()}};
}

// a / b that never traps: integers truncate and INT64_MIN / -1 wraps to INT64_MIN (what torch's
// INT64_MIN * -1 and neg give, and numpy's //); a zero divisor was refused before, 0 is a guard.
template <class T>
T safe_div(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return b && a;
  } else if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    if (b == -1) return T(0 - static_cast<std::make_unsigned_t<T>>(a));
    return a / b;
  } else {
    return a / b;
  }
}

template <class F>
void binary_kernel(const KernelArgs& k, F f) {
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::binary_loop<T, T, T>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                              [&](T a, T b) TERRA_VECTOR_LAMBDA { return static_cast<T>(f(a, b)); });
  });
}

#define TERRA_BINARY(NAME, EXPR)                                                                     \
  TensorMetas infer_##NAME(std::span<const Tensor> in, const Attrs&) {                   \
    return infer_binary(#NAME, in);                                                                  \
  }                                                                                                  \
  TensorMetas infer_##NAME##_(std::span<const Tensor> in, const Attrs&) {                \
    return infer_inplace(#NAME "_", in);                                                             \
  }                                                                                                  \
  /* the element function: the kernel's and, for float32, the fused tile's (tile_f32) */            \
  struct NAME##_fn {                                                                                 \
    template <class T>                                                                               \
    TERRA_VECTOR_MATH T operator()(T a, T b) const {                                                 \
      return static_cast<T>(EXPR);                                                                   \
    }                                                                                                \
  };                                                                                                 \
  void kernel_##NAME(const KernelArgs& k) { binary_kernel(k, NAME##_fn{}); }

TERRA_BINARY(add, a + b)
TERRA_BINARY(sub, a - b)
TERRA_BINARY(mul, a * b)
TERRA_BINARY(div, safe_div(a, b))
#undef TERRA_BINARY

// Integer division by zero traps (SIGFPE) in C++: refuse it, as torch's ZeroDivisionError does.
// One serial pass over the divisor's own elements; the kernel and the check_values hook share it.
void check_divisor(const char* op, const Tensor& a, const Tensor& b) {
  if (is_floating(b.dtype())) return;
  bool zero = false;
  visit_dtype(b.dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::scan_values<T>(*b.impl(), [&](T v, int64_t) { return zero = v == T(0); });
  });
  if (zero)
    throw std::invalid_argument(std::string("[") + op + "] integer division by zero: the " + dtype_name(b.dtype()) +
                                " divisor of shape " + shape_str(b.shape()) +
                                " has a zero element (dividend of shape " + shape_str(a.shape()) + ")");
}
void values_div(std::span<const Tensor> in, const Attrs&) { check_divisor("div", in[0], in[1]); }
void values_div_(std::span<const Tensor> in, const Attrs&) { check_divisor("div_", in[0], in[1]); }
void kernel_div_out(const KernelArgs& k) {
  values_div(k.in, k.attrs);
  kernel_div(k);
}
void kernel_div_inplace(const KernelArgs& k) {
  values_div_(k.in, k.attrs);
  kernel_div(k);
}

std::vector<Tensor> grad_add(const GradArgs& g) {
  return {sum_to(g.grad_out[0], g.in_meta[0].shape), sum_to(g.grad_out[0], g.in_meta[1].shape)};
}
std::vector<Tensor> grad_sub(const GradArgs& g) {
  return {sum_to(g.grad_out[0], g.in_meta[0].shape), sum_to(neg(g.grad_out[0]), g.in_meta[1].shape)};
}
std::vector<Tensor> grad_mul(const GradArgs& g) {
  const Tensor& go = g.grad_out[0];
  return {sum_to(mul(go, g.in[1]), g.in_meta[0].shape), sum_to(mul(go, g.in[0]), g.in_meta[1].shape)};
}
std::vector<Tensor> grad_div(const GradArgs& g) {
  const Tensor& go = g.grad_out[0];
  Tensor ga = div(go, g.in[1]);
  Tensor gb = neg(div(mul(ga, g.in[0]), g.in[1]));
  return {sum_to(ga, g.in_meta[0].shape), sum_to(gb, g.in_meta[1].shape)};
}
// In place: the target's old value gets the gradient of the result directly.
std::vector<Tensor> grad_add_(const GradArgs& g) {
  return {g.grad_out[0], sum_to(g.grad_out[0], g.in_meta[1].shape)};
}
std::vector<Tensor> grad_sub_(const GradArgs& g) {
  return {g.grad_out[0], sum_to(neg(g.grad_out[0]), g.in_meta[1].shape)};
}

const OpDef kAdd{.name = "add", .flags = kElementwise, .infer = infer_add, .kernel = kernel_add, .grad = grad_add,
                 .tile_f32 = cpu::tile_binary<add_fn>};
const OpDef kSub{.name = "sub", .flags = kElementwise, .infer = infer_sub, .kernel = kernel_sub, .grad = grad_sub,
                 .tile_f32 = cpu::tile_binary<sub_fn>};
const OpDef kMul{.name = "mul", .flags = kElementwise | kSaveInputs, .infer = infer_mul, .kernel = kernel_mul,
                 .grad = grad_mul, .tile_f32 = cpu::tile_binary<mul_fn>};
const OpDef kDiv{.name = "div", .flags = kElementwise | kSaveInputs, .infer = infer_div,
                 .kernel = kernel_div_out, .grad = grad_div, .check_values = values_div,
                 .check_inputs = 1u << 1, .tile_f32 = cpu::tile_binary<div_fn>};
const OpDef kAddInplace{.name = "add_", .flags = kElementwise | kInplace, .infer = infer_add_,
                        .kernel = kernel_add, .grad = grad_add_, .tile_f32 = cpu::tile_binary<add_fn>};
const OpDef kSubInplace{.name = "sub_", .flags = kElementwise | kInplace, .infer = infer_sub_,
                        .kernel = kernel_sub, .grad = grad_sub_, .tile_f32 = cpu::tile_binary<sub_fn>};
// mul_/div_ would need the overwritten value for their gradient: no grad (NoGradGuard users).
const OpDef kMulInplace{.name = "mul_", .flags = kElementwise | kInplace, .infer = infer_mul_,
                        .kernel = kernel_mul, .tile_f32 = cpu::tile_binary<mul_fn>};
const OpDef kDivInplace{.name = "div_", .flags = kElementwise | kInplace, .infer = infer_div_,
                        .kernel = kernel_div_inplace, .check_values = values_div_, .check_inputs = 1u << 1,
                        .tile_f32 = cpu::tile_binary<div_fn>};
OpRegistrar r1(kAdd), r2(kSub), r3(kMul), r4(kDiv), r5(kAddInplace), r6(kSubInplace), r7(kMulInplace),
    r8(kDivInplace);

TensorMetas infer_neg(std::span<const Tensor> in, const Attrs&) {
  if (in[0].dtype() == DType::Bool) throw std::invalid_argument("[neg] negation of a bool tensor is not supported");
  return {{in[0].shape(), in[0].dtype()}};
}
struct neg_fn {
  template <class T>
  TERRA_VECTOR_MATH T operator()(T a) const {
    return static_cast<T>(-a);
  }
};
void kernel_neg(const KernelArgs& k) {
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::unary_loop<T, T>(*k.in[0].impl(), *k.out[0].impl(), neg_fn{});
  });
}
std::vector<Tensor> grad_neg(const GradArgs& g) { return {neg(g.grad_out[0])}; }
const OpDef kNeg{.name = "neg", .flags = kElementwise, .infer = infer_neg, .kernel = kernel_neg, .grad = grad_neg,
                 .tile_f32 = cpu::tile_unary<neg_fn>};
OpRegistrar r9(kNeg);

// copy_: the target's old value gets no gradient; the source gets the result's.
TensorMetas infer_copy_(std::span<const Tensor> in, const Attrs&) {
  Shape s = broadcast_shapes("copy_", in[0].shape(), in[1].shape());
  if (s != in[0].shape())
    throw std::invalid_argument("[copy_] cannot broadcast source of shape " + shape_str(in[1].shape()) +
                                " into target of shape " + shape_str(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}
void kernel_copy_(const KernelArgs& k) { cpu::copy_into(*k.in[1].impl(), *k.out[0].impl()); }
std::vector<Tensor> grad_copy_(const GradArgs& g) {
  Tensor gs = sum_to(g.grad_out[0], g.in_meta[1].shape);
  if (g.in_meta[1].dtype != gs.dtype()) gs = gs.to(g.in_meta[1].dtype);
  return {Tensor(), gs};
}
const OpDef kCopyInplace{.name = "copy_", .flags = kInplace, .infer = infer_copy_, .kernel = kernel_copy_,
                         .grad = grad_copy_};

TensorMetas infer_fill_(std::span<const Tensor> in, const Attrs&) {
  return {{in[0].shape(), in[0].dtype()}};
}
void kernel_fill_(const KernelArgs& k) {
  double v = k.attrs.f("value");
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::unary_loop<T, T>(*k.out[0].impl(), *k.out[0].impl(), [v](T) { return static_cast<T>(v); });
  });
}
std::vector<Tensor> grad_fill_(const GradArgs&) { return {Tensor()}; }
const OpDef kFillInplace{.name = "fill_", .flags = kInplace, .infer = infer_fill_, .kernel = kernel_fill_,
                         .grad = grad_fill_};
OpRegistrar r10(kCopyInplace), r11(kFillInplace);

Tensor binary(const OpDef& op, Tensor a, Tensor b) {
  if (!a.defined() || !b.defined())
    throw std::invalid_argument(std::string("[") + op.name + "] input " + (a.defined() ? "1" : "0") +
                                " is undefined");
  promote_pair(a, b);
  return dispatch1(op, {std::move(a), std::move(b)});
}

void inplace(const OpDef& op, const Tensor& self, Tensor other) {
  if (!self.defined() || !other.defined())
    throw std::invalid_argument(std::string("[") + op.name + "] input is undefined");
  if (other.dtype() != self.dtype()) other = other.to(self.dtype());
  dispatch(op, {self, std::move(other)});
}

}  // namespace

Tensor scalar_like(const Tensor& t, double v) {
  if (!t.defined()) throw std::invalid_argument("[scalar] operand tensor is undefined");
  DType d = t.dtype();
  if (!is_floating(d) && (v != double(int64_t(v)) || d == DType::Bool)) d = DType::Float32;
  return scalar_tensor(v, d);
}

void promote_pair(Tensor& a, Tensor& b) {
  if (a.dtype() == b.dtype()) return;
  DType d = promote(a.dtype(), b.dtype());
  if (a.dtype() != d) a = a.to(d);
  if (b.dtype() != d) b = b.to(d);
}

Tensor add(const Tensor& a, const Tensor& b) { return binary(kAdd, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(kSub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(kMul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor x = a, y = b;
  if (x.defined() && y.defined() && !is_floating(x.dtype()) && !is_floating(y.dtype())) {
    x = x.to(DType::Float32);  // true division, as torch
    y = y.to(DType::Float32);
  }
  return binary(kDiv, x, y);
}
Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }
Tensor neg(const Tensor& a) { return dispatch1(kNeg, {a}); }

void add_inplace(const Tensor& self, const Tensor& other) { inplace(kAddInplace, self, other); }
void sub_inplace(const Tensor& self, const Tensor& other) { inplace(kSubInplace, self, other); }
void mul_inplace(const Tensor& self, const Tensor& other) { inplace(kMulInplace, self, other); }
void div_inplace(const Tensor& self, const Tensor& other) { inplace(kDivInplace, self, other); }
void copy_inplace(const Tensor& self, const Tensor& src) { dispatch(kCopyInplace, {self, src}); }
void fill_inplace(const Tensor& self, double value) { dispatch(kFillInplace, {self}, Attrs{{"value", value}}); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(b, a), b); }
Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace terra
