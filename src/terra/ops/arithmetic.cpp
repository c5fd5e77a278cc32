#include "terra/ops/arithmetic.h"

#include <stdexcept>
#include <string>

#include "terra/backend/arithmetic_kernels.h"
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

#define TERRA_BINARY_INFER(NAME)                                                                         \
  TensorMetas infer_##NAME(std::span<const Tensor> in, const Attrs&) { return infer_binary(#NAME, in); }  \
  TensorMetas infer_##NAME##_(std::span<const Tensor> in, const Attrs&) { return infer_inplace(#NAME "_", in); }

TERRA_BINARY_INFER(add)
TERRA_BINARY_INFER(sub)
TERRA_BINARY_INFER(mul)
TERRA_BINARY_INFER(div)
#undef TERRA_BINARY_INFER

// Integer division by zero traps (SIGFPE) in C++: refused before the kernel runs, as torch's
// ZeroDivisionError is; the check_values hook and the kernel share the check.
void values_div(std::span<const Tensor> in, const Attrs&) { kernels::check_divisor("div", in[0], in[1]); }
void values_div_(std::span<const Tensor> in, const Attrs&) { kernels::check_divisor("div_", in[0], in[1]); }
void kernel_div_out(const KernelArgs& k) {
  values_div(k.in, k.attrs);
  kernels::div(k);
}
void kernel_div_inplace(const KernelArgs& k) {
  values_div_(k.in, k.attrs);
  kernels::div(k);
}

TensorList grad_add(const GradArgs& g) {
  return {sum_to(g.grad_out[0], g.in_meta[0].shape), sum_to(g.grad_out[0], g.in_meta[1].shape)};
}
TensorList grad_sub(const GradArgs& g) {
  return {sum_to(g.grad_out[0], g.in_meta[0].shape), sum_to(neg(g.grad_out[0]), g.in_meta[1].shape)};
}
TensorList grad_mul(const GradArgs& g) {
  const Tensor& go = g.grad_out[0];
  return {sum_to(mul(go, g.in[1]), g.in_meta[0].shape), sum_to(mul(go, g.in[0]), g.in_meta[1].shape)};
}
TensorList grad_div(const GradArgs& g) {
  const Tensor& go = g.grad_out[0];
  Tensor ga = div(go, g.in[1]);
  Tensor gb = neg(div(mul(ga, g.in[0]), g.in[1]));
  return {sum_to(ga, g.in_meta[0].shape), sum_to(gb, g.in_meta[1].shape)};
}
// In place: the target's old value gets the gradient of the result directly.
TensorList grad_add_(const GradArgs& g) {
  return {g.grad_out[0], sum_to(g.grad_out[0], g.in_meta[1].shape)};
}
TensorList grad_sub_(const GradArgs& g) {
  return {g.grad_out[0], sum_to(neg(g.grad_out[0]), g.in_meta[1].shape)};
}

const OpDef kAdd{.name = "add", .flags = kElementwise, .infer = infer_add, .kernel = kernels::add, .grad = grad_add,
                 .tile_f32 = kernels::tile_add};
const OpDef kSub{.name = "sub", .flags = kElementwise, .infer = infer_sub, .kernel = kernels::sub, .grad = grad_sub,
                 .tile_f32 = kernels::tile_sub};
const OpDef kMul{.name = "mul", .flags = kElementwise | kSaveInputs, .infer = infer_mul, .kernel = kernels::mul,
                 .grad = grad_mul, .tile_f32 = kernels::tile_mul};
const OpDef kDiv{.name = "div", .flags = kElementwise | kSaveInputs, .infer = infer_div,
                 .kernel = kernel_div_out, .grad = grad_div, .check_values = values_div,
                 .check_inputs = 1u << 1, .tile_f32 = kernels::tile_div};
const OpDef kAddInplace{.name = "add_", .flags = kElementwise | kInplace, .infer = infer_add_,
                        .kernel = kernels::add, .grad = grad_add_, .tile_f32 = kernels::tile_add};
const OpDef kSubInplace{.name = "sub_", .flags = kElementwise | kInplace, .infer = infer_sub_,
                        .kernel = kernels::sub, .grad = grad_sub_, .tile_f32 = kernels::tile_sub};
// mul_/div_ would need the overwritten value for their gradient: no grad (NoGradGuard users).
const OpDef kMulInplace{.name = "mul_", .flags = kElementwise | kInplace, .infer = infer_mul_,
                        .kernel = kernels::mul, .tile_f32 = kernels::tile_mul};
const OpDef kDivInplace{.name = "div_", .flags = kElementwise | kInplace, .infer = infer_div_,
                        .kernel = kernel_div_inplace, .check_values = values_div_, .check_inputs = 1u << 1,
                        .tile_f32 = kernels::tile_div};
OpRegistrar r1(kAdd), r2(kSub), r3(kMul), r4(kDiv), r5(kAddInplace), r6(kSubInplace), r7(kMulInplace),
    r8(kDivInplace);

TensorMetas infer_neg(std::span<const Tensor> in, const Attrs&) {
  if (in[0].dtype() == DType::Bool) throw std::invalid_argument("[neg] negation of a bool tensor is not supported");
  return {{in[0].shape(), in[0].dtype()}};
}
TensorList grad_neg(const GradArgs& g) { return {neg(g.grad_out[0])}; }
const OpDef kNeg{.name = "neg", .flags = kElementwise, .infer = infer_neg, .kernel = kernels::neg, .grad = grad_neg,
                 .tile_f32 = kernels::tile_neg};
OpRegistrar r9(kNeg);

// copy_: the target's old value gets no gradient; the source gets the result's.
TensorMetas infer_copy_(std::span<const Tensor> in, const Attrs&) {
  Shape s = broadcast_shapes("copy_", in[0].shape(), in[1].shape());
  if (s != in[0].shape())
    throw std::invalid_argument("[copy_] cannot broadcast source of shape " + shape_str(in[1].shape()) +
                                " into target of shape " + shape_str(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}
TensorList grad_copy_(const GradArgs& g) {
  Tensor gs = sum_to(g.grad_out[0], g.in_meta[1].shape);
  if (g.in_meta[1].dtype != gs.dtype()) gs = gs.to(g.in_meta[1].dtype);
  return {Tensor(), gs};
}
const OpDef kCopyInplace{.name = "copy_", .flags = kInplace, .infer = infer_copy_, .kernel = kernels::copy_into,
                         .grad = grad_copy_};

TensorMetas infer_fill_(std::span<const Tensor> in, const Attrs&) {
  return {{in[0].shape(), in[0].dtype()}};
}
TensorList grad_fill_(const GradArgs&) { return {Tensor()}; }
const OpDef kFillInplace{.name = "fill_", .flags = kInplace, .infer = infer_fill_, .kernel = kernels::fill,
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
  dispatch_effect(op, {self, std::move(other)});
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
void copy_inplace(const Tensor& self, const Tensor& src) { dispatch_effect(kCopyInplace, {self, src}); }
void fill_inplace(const Tensor& self, double value) { dispatch_effect(kFillInplace, {self}, Attrs{{"value", value}}); }

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
