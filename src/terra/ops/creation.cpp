#include "terra/ops/creation.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "terra/backend/creation_kernels.h"
#include "terra/core/dispatch.h"

namespace terra {
namespace {

template <class T>
Tensor from_host(const std::vector<T>& v, const Shape& shape, const char* who) {
  check_shape(who, shape, sizeof(T));
  if (int64_t(v.size()) != numel_of(who, shape))
    throw std::invalid_argument(std::string("[") + who + "] " + std::to_string(v.size()) +
                                " values do not fill shape " + shape_str(shape));
  Tensor t = empty(shape, dtype_of<T>::value, who);
  if (!v.empty()) std::memcpy(t.impl()->data(), v.data(), v.size() * sizeof(T));
  return mark_external(t);
}

TensorMetas infer_full(std::span<const Tensor>, const Attrs& a) {
  check_shape("full", a.ints("shape"), itemsize(a.dtype("dtype")));
  return {{a.ints("shape"), a.dtype("dtype")}};
}
const OpDef kFull{.name = "full", .flags = 0, .infer = infer_full, .kernel = kernels::full};
OpRegistrar reg_full(kFull);

TensorMetas infer_arange(std::span<const Tensor>, const Attrs& a) {
  int64_t s = a.i("start"), e = a.i("end"), st = a.i("step");
  if (st == 0) throw std::invalid_argument("[arange] step must be nonzero");
  // In 128 bits: e - s and the rounding up overflow int64 for far-apart bounds.
  __int128 span = __int128(e) - s, step = st;
  __int128 n = span == 0 || (span > 0) != (step > 0) ? 0 : (span + step - (step > 0 ? 1 : -1)) / step;
  if (n > INT64_MAX)
    throw std::invalid_argument("[arange] range [" + std::to_string(s) + ", " + std::to_string(e) + ") with step " +
                                std::to_string(st) + " has more elements than int64 can count");
  return {{{int64_t(n)}, a.dtype("dtype")}};
}
const OpDef kArange{.name = "arange", .flags = kNoGrad, .infer = infer_arange, .kernel = kernels::arange};
OpRegistrar reg_arange(kArange);

TensorMetas infer_eye(std::span<const Tensor>, const Attrs& a) {
  int64_t n = a.i("n"), m = a.i("m");
  if (n < 0 || m < 0)
    throw std::invalid_argument("[eye] sizes must be non-negative, got n=" + std::to_string(n) + ", m=" + std::to_string(m));
  return {{{n, m}, a.dtype("dtype")}};
}
const OpDef kEye{.name = "eye", .flags = 0, .infer = infer_eye, .kernel = kernels::eye};
OpRegistrar reg_eye(kEye);

// The factory's own name in shape errors (the op itself is "full").
Tensor full_op(const char* who, Shape shape, double value, DType dtype) {
  check_shape(who, shape, itemsize(dtype));
  return dispatch1(kFull, {}, Attrs{{"shape", shape}, {"value", value}, {"dtype", dtype}});
}

}  // namespace

Tensor tensor(std::vector<float> values, Shape shape) { return from_host(values, shape, "tensor"); }
Tensor tensor_f64(std::vector<double> values, Shape shape) { return from_host(values, shape, "tensor"); }
Tensor tensor(std::vector<int64_t> values, Shape shape) { return from_host(values, shape, "tensor"); }
Tensor tensor_bool(std::vector<bool> values, Shape shape) {
  check_shape("tensor", shape);
  std::vector<char> tmp(values.begin(), values.end());
  if (int64_t(tmp.size()) != numel_of("tensor", shape))
    throw std::invalid_argument("[tensor] " + std::to_string(tmp.size()) + " values do not fill shape " + shape_str(shape));
  Tensor t = empty(shape, DType::Bool, "tensor");
  if (!tmp.empty()) std::memcpy(t.impl()->data(), tmp.data(), tmp.size());
  return mark_external(t);
}

Tensor scalar_tensor(double value, DType dtype) {
  Tensor t = empty({}, dtype, "scalar_tensor");
  visit_dtype(dtype, [&](auto z) {
    using T = decltype(z);
    *t.impl()->data_as<T>() = static_cast<T>(value);
  });
  return mark_external(t);
}

Tensor full(Shape shape, double value, DType dtype) { return full_op("full", std::move(shape), value, dtype); }
Tensor zeros(Shape shape, DType dtype) { return full_op("zeros", std::move(shape), 0.0, dtype); }
Tensor ones(Shape shape, DType dtype) { return full_op("ones", std::move(shape), 1.0, dtype); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }
Tensor arange(int64_t n) { return arange(0, n, 1, DType::Int64); }
Tensor arange(int64_t start, int64_t end, int64_t step, DType dtype) {
  return dispatch1(kArange, {}, Attrs{{"start", start}, {"end", end}, {"step", step}, {"dtype", dtype}});
}

Tensor eye(int64_t n, int64_t m, DType dtype) {
  return dispatch1(kEye, {}, Attrs{{"n", n}, {"m", m < 0 ? n : m}, {"dtype", dtype}});
}

}  // namespace terra
