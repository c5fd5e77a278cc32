#include "terra/ops/pool.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/backend/pool_kernels.h"
#include "terra/core/dispatch.h"

namespace terra {
namespace {

std::vector<int64_t> v2(Int2 a) { return {a[0], a[1]}; }
Int2 int2(const Attrs& a, const char* n) { return {a.ints(n)[0], a.ints(n)[1]}; }

void check_input(const char* op, const Tensor& x) {
  if (x.dim() != 4)
    throw std::invalid_argument(std::string("[") + op + "] input must be 4-D [N, C, H, W], got shape " +
                                shape_str(x.shape()));
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string("[") + op + "] input must be float32 or float64, got " +
                                dtype_name(x.dtype()));
}

// Output shape of a kernel/stride/padding window over input shape x.
Shape window_out(const char* op, const Shape& x, const Attrs& a) {
  const auto &k = a.ints("kernel"), &s = a.ints("stride"), &p = a.ints("padding");
  Shape out{x[0], x[1], 0, 0};
  for (size_t d = 0; d < 2; ++d) {
    if (k[d] <= 0 || s[d] <= 0 || p[d] < 0)
      throw std::invalid_argument(std::string("[") + op + "] kernel " + shape_str(k) + " and stride " + shape_str(s) +
                                  " must be positive and padding " + shape_str(p) + " non-negative");
    if (p[d] * 2 > k[d])
      throw std::invalid_argument(std::string("[") + op + "] padding " + shape_str(p) +
                                  " must be at most half of kernel " + shape_str(k));
    if (k[d] > x[2 + d] + 2 * p[d])
      throw std::invalid_argument(std::string("[") + op + "] kernel " + shape_str(k) +
                                  " is larger than the padded input; input " + shape_str(x) + ", padding " +
                                  shape_str(p));
    out[2 + d] = (x[2 + d] + 2 * p[d] - k[d]) / s[d] + 1;
  }
  return out;
}

void check_grad_shape(const char* op, const Tensor& gy, const Shape& want) {
  if (gy.shape() != want)
    throw std::invalid_argument(std::string("[") + op + "] output gradient of shape " + shape_str(gy.shape()) +
                                " does not match the forward output shape " + shape_str(want));
}
Shape input_shape_attr(const char* op, const Attrs& a) {
  const Shape& s = a.ints("input_shape");
  if (s.size() != 4)
    throw std::invalid_argument(std::string("[") + op + "] input_shape must be 4-D, got " + shape_str(s));
  return s;
}

// ---------------------------------------------------------------- max_pool2d
TensorMetas infer_max_pool2d(std::span<const Tensor> in, const Attrs& a) {
  check_input("max_pool2d", in[0]);
  Shape out = window_out("max_pool2d", in[0].shape(), a);
  return {{out, in[0].dtype()}, {out, DType::Int64}};
}
TensorList grad_max_pool2d(const GradArgs& g) {
  return {max_pool2d_backward(g.grad_out[0], g.out[1], g.in_meta[0].shape)};
}
TensorMetas infer_max_pool2d_backward(std::span<const Tensor> in, const Attrs& a) {
  Shape xs = input_shape_attr("max_pool2d_backward", a);
  if (in[1].dtype() != DType::Int64)
    throw std::invalid_argument("[max_pool2d_backward] indices must be int64, got " +
                                std::string(dtype_name(in[1].dtype())));
  if (in[0].dim() != 4 || in[0].shape() != in[1].shape() || in[0].shape()[0] != xs[0] || in[0].shape()[1] != xs[1])
    throw std::invalid_argument("[max_pool2d_backward] output gradient of shape " + shape_str(in[0].shape()) +
                                " and indices of shape " + shape_str(in[1].shape()) +
                                " do not fit an input of shape " + shape_str(xs));
  return {{xs, in[0].dtype()}};
}

// ---------------------------------------------------------------- avg_pool2d
TensorMetas infer_avg_pool2d(std::span<const Tensor> in, const Attrs& a) {
  check_input("avg_pool2d", in[0]);
  return {{window_out("avg_pool2d", in[0].shape(), a), in[0].dtype()}};
}
TensorList grad_avg_pool2d(const GradArgs& g) {
  return {avg_pool2d_backward(g.grad_out[0], g.in_meta[0].shape, int2(g.attrs, "kernel"), int2(g.attrs, "stride"),
                              int2(g.attrs, "padding"), g.attrs.b("count_include_pad"))};
}
TensorMetas infer_avg_pool2d_backward(std::span<const Tensor> in, const Attrs& a) {
  Shape xs = input_shape_attr("avg_pool2d_backward", a);
  check_grad_shape("avg_pool2d_backward", in[0], window_out("avg_pool2d_backward", xs, a));
  if (!is_floating(in[0].dtype()))  // as the kernel says, but at the call in every mode
    throw std::invalid_argument("[avg_pool2d_backward] only float32 and float64 are supported");
  return {{xs, in[0].dtype()}};
}

// ---------------------------------------------------------------- adaptive_avg_pool2d
TensorMetas infer_adaptive_avg_pool2d(std::span<const Tensor> in, const Attrs& a) {
  check_input("adaptive_avg_pool2d", in[0]);
  const auto& o = a.ints("output_size");
  if (o[0] <= 0 || o[1] <= 0)
    throw std::invalid_argument("[adaptive_avg_pool2d] output_size " + shape_str(o) + " must be positive");
  const Shape& x = in[0].shape();
  if (x[2] == 0 || x[3] == 0)
    throw std::invalid_argument("[adaptive_avg_pool2d] input of shape " + shape_str(x) + " has an empty spatial dim");
  return {{{x[0], x[1], o[0], o[1]}, in[0].dtype()}};
}
TensorList grad_adaptive_avg_pool2d(const GradArgs& g) {
  return {adaptive_avg_pool2d_backward(g.grad_out[0], g.in_meta[0].shape)};
}

// ---------------------------------------------------------------- upsample_nearest2d
TensorMetas infer_upsample_nearest2d(std::span<const Tensor> in, const Attrs& a) {
  check_input("upsample_nearest2d", in[0]);
  const auto& o = a.ints("output_size");
  if (o[0] <= 0 || o[1] <= 0)
    throw std::invalid_argument("[upsample_nearest2d] output_size " + shape_str(o) + " must be positive");
  const Shape& x = in[0].shape();
  if (x[2] == 0 || x[3] == 0)
    throw std::invalid_argument("[upsample_nearest2d] input of shape " + shape_str(x) + " has an empty spatial dim");
  return {{{x[0], x[1], o[0], o[1]}, in[0].dtype()}};
}
TensorList grad_upsample_nearest2d(const GradArgs& g) {
  return {upsample_nearest2d_backward(g.grad_out[0], g.in_meta[0].shape)};
}

// Backward of the shape-only ops: the gradient keeps N and C of the input.
TensorMetas infer_resize_backward(const char* op, std::span<const Tensor> in, const Attrs& a) {
  Shape xs = input_shape_attr(op, a);
  const Shape& g = in[0].shape();
  if (g.size() != 4 || g[0] != xs[0] || g[1] != xs[1] || xs[2] <= 0 || xs[3] <= 0)
    throw std::invalid_argument(std::string("[") + op + "] output gradient of shape " + shape_str(g) +
                                " does not fit an input of shape " + shape_str(xs));
  return {{xs, in[0].dtype()}};
}
TensorMetas infer_adaptive_avg_pool2d_backward(std::span<const Tensor> in, const Attrs& a) {
  return infer_resize_backward("adaptive_avg_pool2d_backward", in, a);
}
TensorMetas infer_upsample_nearest2d_backward(std::span<const Tensor> in, const Attrs& a) {
  return infer_resize_backward("upsample_nearest2d_backward", in, a);
}

const OpDef kMaxPool{.name = "max_pool2d", .flags = kSaveOutputs, .infer = infer_max_pool2d,
                     .kernel = kernels::max_pool2d, .grad = grad_max_pool2d};
const OpDef kMaxPoolBwd{.name = "max_pool2d_backward", .infer = infer_max_pool2d_backward,
                        .kernel = kernels::max_pool2d_backward,
                        .check_values = kernels::max_pool2d_backward_values, .check_inputs = 1u << 1};
const OpDef kAvgPool{.name = "avg_pool2d", .infer = infer_avg_pool2d, .kernel = kernels::avg_pool2d,
                     .grad = grad_avg_pool2d};
const OpDef kAvgPoolBwd{.name = "avg_pool2d_backward", .infer = infer_avg_pool2d_backward,
                        .kernel = kernels::avg_pool2d_backward};
const OpDef kAdaptive{.name = "adaptive_avg_pool2d", .infer = infer_adaptive_avg_pool2d,
                      .kernel = kernels::adaptive_avg_pool2d, .grad = grad_adaptive_avg_pool2d};
const OpDef kAdaptiveBwd{.name = "adaptive_avg_pool2d_backward", .infer = infer_adaptive_avg_pool2d_backward,
                         .kernel = kernels::adaptive_avg_pool2d_backward};
const OpDef kUpsample{.name = "upsample_nearest2d", .infer = infer_upsample_nearest2d,
                      .kernel = kernels::upsample_nearest2d, .grad = grad_upsample_nearest2d};
const OpDef kUpsampleBwd{.name = "upsample_nearest2d_backward", .infer = infer_upsample_nearest2d_backward,
                         .kernel = kernels::upsample_nearest2d_backward};
OpRegistrar r1(kMaxPool), r2(kMaxPoolBwd), r3(kAvgPool), r4(kAvgPoolBwd), r5(kAdaptive), r6(kAdaptiveBwd),
    r7(kUpsample), r8(kUpsampleBwd);

Attrs window_attrs(Int2 kernel, Int2 stride, Int2 padding) {
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;
  return Attrs{{"kernel", v2(kernel)}, {"stride", v2(stride)}, {"padding", v2(padding)}};
}
void check_defined(const char* op, const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument(std::string("[") + op + "] input is undefined");
}

}  // namespace

Tensor max_pool2d(const Tensor& x, Int2 kernel, Int2 stride, Int2 padding) {
  check_defined("max_pool2d", x);
  return dispatch(kMaxPool, {x}, window_attrs(kernel, stride, padding))[0];
}
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  return max_pool2d(x, Int2{kernel, kernel}, Int2{stride, stride}, Int2{padding, padding});
}
Tensor avg_pool2d(const Tensor& x, Int2 kernel, Int2 stride, Int2 padding, bool count_include_pad) {
  check_defined("avg_pool2d", x);
  Attrs a = window_attrs(kernel, stride, padding);
  a.set("count_include_pad", count_include_pad);
  return dispatch1(kAvgPool, {x}, a);
}
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding, bool count_include_pad) {
  return avg_pool2d(x, Int2{kernel, kernel}, Int2{stride, stride}, Int2{padding, padding}, count_include_pad);
}
Tensor adaptive_avg_pool2d(const Tensor& x, Int2 output_size) {
  check_defined("adaptive_avg_pool2d", x);
  return dispatch1(kAdaptive, {x}, Attrs{{"output_size", v2(output_size)}});
}
Tensor upsample_nearest2d(const Tensor& x, Int2 output_size) {
  check_defined("upsample_nearest2d", x);
  return dispatch1(kUpsample, {x}, Attrs{{"output_size", v2(output_size)}});
}
Tensor upsample_nearest2d(const Tensor& x, double scale_factor) {
  check_defined("upsample_nearest2d", x);
  if (x.dim() != 4)
    throw std::invalid_argument("[upsample_nearest2d] input must be 4-D [N, C, H, W], got shape " +
                                shape_str(x.shape()));
  if (!(scale_factor > 0))
    throw std::invalid_argument("[upsample_nearest2d] scale_factor must be positive, got " +
                                std::to_string(scale_factor));
  return upsample_nearest2d(x, Int2{int64_t(std::floor(double(x.shape()[2]) * scale_factor)),
                                    int64_t(std::floor(double(x.shape()[3]) * scale_factor))});
}

Tensor max_pool2d_backward(const Tensor& grad_y, const Tensor& indices, const Shape& input_shape) {
  return dispatch1(kMaxPoolBwd, {grad_y, indices}, Attrs{{"input_shape", input_shape}});
}
Tensor avg_pool2d_backward(const Tensor& grad_y, const Shape& input_shape, Int2 kernel, Int2 stride, Int2 padding,
                           bool count_include_pad) {
  Attrs a = window_attrs(kernel, stride, padding);
  a.set("count_include_pad", count_include_pad);
  a.set("input_shape", input_shape);
  return dispatch1(kAvgPoolBwd, {grad_y}, a);
}
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_y, const Shape& input_shape) {
  return dispatch1(kAdaptiveBwd, {grad_y}, Attrs{{"input_shape", input_shape}});
}
Tensor upsample_nearest2d_backward(const Tensor& grad_y, const Shape& input_shape) {
  return dispatch1(kUpsampleBwd, {grad_y}, Attrs{{"input_shape", input_shape}});
}

}  // namespace terra
