#include "terra/ops/conv.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "terra/backend/conv_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/ops/reduce.h"

namespace terra {
namespace {

std::string ints_str(const std::vector<int64_t>& v) { return shape_str(v); }

Attrs conv_attrs(Int2 stride, Int2 padding, Int2 dilation, int64_t groups) {
  return Attrs{{"stride", std::vector<int64_t>{stride[0], stride[1]}},
               {"padding", std::vector<int64_t>{padding[0], padding[1]}},
               {"dilation", std::vector<int64_t>{dilation[0], dilation[1]}},
               {"groups", groups}};
}
Int2 int2(const Attrs& a, const char* n) { return {a.ints(n)[0], a.ints(n)[1]}; }

void check_float(const char* op, const Tensor& t, const char* what) {
  if (!is_floating(t.dtype()))
    throw std::invalid_argument(std::string("[") + op + "] " + what + " must be float32 or float64, got " +
                                dtype_name(t.dtype()));
}
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b, const char* what) {
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(std::string("[") + op + "] " + what + " has dtype " + dtype_name(b.dtype()) +
                                " but input has dtype " + dtype_name(a.dtype()));
}

void check_params(const char* op, const Attrs& a) {
  for (int64_t s : a.ints("stride"))
    if (s <= 0) throw std::invalid_argument(std::string("[") + op + "] stride must be positive, got " + ints_str(a.ints("stride")));
  for (int64_t p : a.ints("padding"))
    if (p < 0) throw std::invalid_argument(std::string("[") + op + "] padding must be non-negative, got " + ints_str(a.ints("padding")));
  for (int64_t d : a.ints("dilation"))
    if (d <= 0) throw std::invalid_argument(std::string("[") + op + "] dilation must be positive, got " + ints_str(a.ints("dilation")));
  if (a.i("groups") <= 0)
    throw std::invalid_argument(std::string("[") + op + "] groups must be positive, got " + std::to_string(a.i("groups")));
}

// Output size of conv2d on x with weight w; validates everything and names the shapes.
Shape conv_out_shape(const char* op, const Shape& x, const Shape& w, const Attrs& a) {
  check_params(op, a);
  const int64_t G = a.i("groups");
  if (x.size() != 4)
    throw std::invalid_argument(std::string("[") + op + "] input must be 4-D [N, C, H, W], got shape " + shape_str(x));
  if (w.size() != 4)
    throw std::invalid_argument(std::string("[") + op + "] weight must be 4-D [out, in/groups, kh, kw], got shape " +
                                shape_str(w));
  if (w[0] % G != 0)
    throw std::invalid_argument(std::string("[") + op + "] weight of shape " + shape_str(w) + " has " +
                                std::to_string(w[0]) + " output channels, not divisible by groups=" + std::to_string(G));
  if (__int128(x[1]) != __int128(w[1]) * G)
    throw std::invalid_argument(std::string("[") + op + "] input of shape " + shape_str(x) + " has " +
                                std::to_string(x[1]) + " channels but weight of shape " + shape_str(w) + " expects " +
                                std::to_string(w[1] * G) + " (groups=" + std::to_string(G) + ")");
  Shape out{x[0], w[0], 0, 0};
  for (int d = 0; d < 2; ++d) {
    int64_t s = a.ints("stride")[size_t(d)], p = a.ints("padding")[size_t(d)], dil = a.ints("dilation")[size_t(d)];
    // 128-bit: a huge dilation or padding must give an error, not a wrapped size.
    __int128 ext = __int128(dil) * (w[size_t(2 + d)] - 1) + 1, in = __int128(x[size_t(2 + d)]) + __int128(2) * p;
    if (in > INT64_MAX) throw std::invalid_argument(std::string("[") + op + "] padded input size overflows int64; input " +
                                                    shape_str(x) + ", padding " + ints_str(a.ints("padding")));
    if (ext > in)
      throw std::invalid_argument(std::string("[") + op + "] kernel of size " +
                                  (ext > INT64_MAX ? std::string("> 2^63") : std::to_string(int64_t(ext))) +
                                  " (dilated) is larger than the padded input of size " + std::to_string(int64_t(in)) +
                                  "; input " + shape_str(x) + ", weight " + shape_str(w) + ", padding " +
                                  ints_str(a.ints("padding")));
    out[size_t(2 + d)] = int64_t((in - ext) / s + 1);
  }
  return out;
}

// ---------------------------------------------------------------- conv2d
TensorMetas infer_conv2d(std::span<const Tensor> in, const Attrs& a) {
  check_float("conv2d", in[0], "input");
  check_same_dtype("conv2d", in[0], in[1], "weight");
  Shape out = conv_out_shape("conv2d", in[0].shape(), in[1].shape(), a);
  if (in.size() > 2) {
    check_same_dtype("conv2d", in[0], in[2], "bias");
    if (in[2].shape() != Shape{in[1].shape()[0]})
      throw std::invalid_argument("[conv2d] bias of shape " + shape_str(in[2].shape()) + " does not match weight of shape " +
                                  shape_str(in[1].shape()) + " (expected [" + std::to_string(in[1].shape()[0]) + "])");
  }
  return {{out, in[0].dtype()}};
}

TensorList grad_conv2d(const GradArgs& g) {
  const Tensor& go = g.grad_out[0];
  Int2 s = int2(g.attrs, "stride"), p = int2(g.attrs, "padding"), d = int2(g.attrs, "dilation");
  int64_t G = g.attrs.i("groups");
  TensorList r{conv2d_backward_input(go, g.in[1], g.in_meta[0].shape, s, p, d, G),
               conv2d_backward_weight(go, g.in[0], g.in_meta[1].shape, s, p, d, G)};
  if (g.in.size() > 2) r.push_back(sum(go, {0, 2, 3}));
  return r;
}

// ---------------------------------------------------------------- conv2d_backward_input
TensorMetas infer_conv2d_backward_input(std::span<const Tensor> in, const Attrs& a) {
  const Shape& xs = a.ints("input_shape");
  Shape want = conv_out_shape("conv2d_backward_input", xs, in[1].shape(), a);
  check_same_dtype("conv2d_backward_input", in[0], in[1], "weight");
  if (!is_floating(in[0].dtype()))  // as the kernel says, but at the call in every mode
    throw std::invalid_argument("[conv2d_backward_input] only float32 and float64 are supported");
  if (in[0].shape() != want)
    throw std::invalid_argument("[conv2d_backward_input] output gradient of shape " + shape_str(in[0].shape()) +
                                " does not match the conv output shape " + shape_str(want) + " for input " +
                                shape_str(xs) + " and weight " + shape_str(in[1].shape()));
  return {{xs, in[0].dtype()}};
}

// ---------------------------------------------------------------- conv2d_backward_weight
TensorMetas infer_conv2d_backward_weight(std::span<const Tensor> in, const Attrs& a) {
  const Shape& ws = a.ints("weight_shape");
  Shape want = conv_out_shape("conv2d_backward_weight", in[1].shape(), ws, a);
  check_same_dtype("conv2d_backward_weight", in[0], in[1], "input");
  if (!is_floating(in[0].dtype()))  // as the kernel says, but at the call in every mode
    throw std::invalid_argument("[conv2d_backward_weight] only float32 and float64 are supported");
  if (in[0].shape() != want)
    throw std::invalid_argument("[conv2d_backward_weight] output gradient of shape " + shape_str(in[0].shape()) +
                                " does not match the conv output shape " + shape_str(want) + " for input " +
                                shape_str(in[1].shape()) + " and weight " + shape_str(ws));
  return {{ws, in[0].dtype()}};
}

// ---------------------------------------------------------------- conv_transpose2d
Shape conv_transpose_out_shape(const Shape& x, const Shape& w, const Attrs& a) {
  const char* op = "conv_transpose2d";
  check_params(op, a);
  const int64_t G = a.i("groups");
  if (x.size() != 4)
    throw std::invalid_argument(std::string("[") + op + "] input must be 4-D [N, C, H, W], got shape " + shape_str(x));
  if (w.size() != 4)
    throw std::invalid_argument(std::string("[") + op + "] weight must be 4-D [in, out/groups, kh, kw], got shape " +
                                shape_str(w));
  if (x[1] != w[0])
    throw std::invalid_argument(std::string("[") + op + "] input of shape " + shape_str(x) + " has " +
                                std::to_string(x[1]) + " channels but weight of shape " + shape_str(w) + " expects " +
                                std::to_string(w[0]) + " (groups=" + std::to_string(G) + ")");
  if (w[0] % G != 0)
    throw std::invalid_argument(std::string("[") + op + "] weight of shape " + shape_str(w) + " has " +
                                std::to_string(w[0]) + " input channels, not divisible by groups=" + std::to_string(G));
  Shape out{x[0], checked_mul(op, w[1], G, "output channels of weight " + shape_str(w)), 0, 0};
  for (int d = 0; d < 2; ++d) {
    int64_t s = a.ints("stride")[size_t(d)], p = a.ints("padding")[size_t(d)], dil = a.ints("dilation")[size_t(d)];
    int64_t op_ = a.ints("output_padding")[size_t(d)];
    if (op_ < 0 || op_ >= s)
      throw std::invalid_argument(std::string("[") + op + "] output_padding " + ints_str(a.ints("output_padding")) +
                                  " must be non-negative and smaller than stride " + ints_str(a.ints("stride")));
    __int128 o = (__int128(x[size_t(2 + d)]) - 1) * s - __int128(2) * p + __int128(dil) * (w[size_t(2 + d)] - 1) + op_ + 1;
    if (o > INT64_MAX)
      throw std::invalid_argument(std::string("[") + op + "] output size overflows int64 for input " + shape_str(x) +
                                  ", weight " + shape_str(w) + ", stride " + ints_str(a.ints("stride")));
    out[size_t(2 + d)] = o < 0 ? 0 : int64_t(o);
    if (out[size_t(2 + d)] <= 0)
      throw std::invalid_argument(std::string("[") + op + "] output size " + shape_str(out) +
                                  " is not positive for input " + shape_str(x) + ", weight " + shape_str(w) +
                                  ", padding " + ints_str(a.ints("padding")));
  }
  return out;
}

TensorMetas infer_conv_transpose2d(std::span<const Tensor> in, const Attrs& a) {
  check_float("conv_transpose2d", in[0], "input");
  check_same_dtype("conv_transpose2d", in[0], in[1], "weight");
  Shape out = conv_transpose_out_shape(in[0].shape(), in[1].shape(), a);
  if (in.size() > 2) {
    check_same_dtype("conv_transpose2d", in[0], in[2], "bias");
    if (in[2].shape() != Shape{out[1]})
      throw std::invalid_argument("[conv_transpose2d] bias of shape " + shape_str(in[2].shape()) +
                                  " does not match weight of shape " + shape_str(in[1].shape()) + " (expected [" +
                                  std::to_string(out[1]) + "])");
  }
  return {{out, in[0].dtype()}};
}

TensorList grad_conv_transpose2d(const GradArgs& g) {
  const Tensor& go = g.grad_out[0];
  Int2 s = int2(g.attrs, "stride"), p = int2(g.attrs, "padding"), d = int2(g.attrs, "dilation");
  int64_t G = g.attrs.i("groups");
  TensorList r{conv2d(go, g.in[1], Tensor(), s, p, d, G),
               conv2d_backward_weight(g.in[0], go, g.in_meta[1].shape, s, p, d, G)};
  if (g.in.size() > 2) r.push_back(sum(go, {0, 2, 3}));
  return r;
}

// Multiply-adds of a convolution: each element of the (forward) output sums C/G * KH * KW
// products; the backward passes do the same products in another order.
int64_t work_conv2d(std::span<const Tensor> in, std::span<const TensorMeta> out, const Attrs&) {
  const Shape& w = in[1].shape();  // [O, C/G, KH, KW]
  return numel_of(out[0].shape) * w[1] * w[2] * w[3];
}
int64_t work_conv2d_backward_input(std::span<const Tensor> in, std::span<const TensorMeta>, const Attrs&) {
  const Shape& w = in[1].shape();  // in[0]: the forward output's gradient
  return in[0].numel() * w[1] * w[2] * w[3];
}
int64_t work_conv2d_backward_weight(std::span<const Tensor> in, std::span<const TensorMeta> out, const Attrs&) {
  const Shape& w = out[0].shape;  // in[0]: the forward output's gradient
  return in[0].numel() * w[1] * w[2] * w[3];
}
int64_t work_conv_transpose2d(std::span<const Tensor> in, std::span<const TensorMeta>, const Attrs&) {
  const Shape& w = in[1].shape();  // [C, O/G, KH, KW]: every input element feeds O/G * KH * KW outputs
  return in[0].numel() * w[1] * w[2] * w[3];
}

const OpDef kConv2d{.name = "conv2d", .flags = kSaveInputs, .infer = infer_conv2d, .kernel = kernels::conv2d,
                    .grad = grad_conv2d, .work = work_conv2d};
const OpDef kConv2dBackwardInput{.name = "conv2d_backward_input", .infer = infer_conv2d_backward_input,
                                 .kernel = kernels::conv2d_backward_input, .work = work_conv2d_backward_input};
const OpDef kConv2dBackwardWeight{.name = "conv2d_backward_weight", .infer = infer_conv2d_backward_weight,
                                  .kernel = kernels::conv2d_backward_weight, .work = work_conv2d_backward_weight};
const OpDef kConvTranspose2d{.name = "conv_transpose2d", .flags = kSaveInputs, .infer = infer_conv_transpose2d,
                             .kernel = kernels::conv_transpose2d, .grad = grad_conv_transpose2d,
                             .work = work_conv_transpose2d};
OpRegistrar r1(kConv2d), r2(kConv2dBackwardInput), r3(kConv2dBackwardWeight), r4(kConvTranspose2d);

void check_defined(const char* op, const Tensor& x, const Tensor& w) {
  if (!x.defined()) throw std::invalid_argument(std::string("[") + op + "] input is undefined");
  if (!w.defined()) throw std::invalid_argument(std::string("[") + op + "] weight is undefined");
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, Int2 stride, Int2 padding, Int2 dilation,
              int64_t groups) {
  check_defined("conv2d", x, w);
  std::vector<Tensor> in{x, w};
  if (b.defined()) in.push_back(b);
  return dispatch1(kConv2d, std::move(in), conv_attrs(stride, padding, dilation, groups));
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t padding) {
  return conv2d(x, w, b, Int2{stride, stride}, Int2{padding, padding});
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, Int2 stride, Int2 padding,
                        Int2 output_padding, int64_t groups, Int2 dilation) {
  check_defined("conv_transpose2d", x, w);
  std::vector<Tensor> in{x, w};
  if (b.defined()) in.push_back(b);
  Attrs a = conv_attrs(stride, padding, dilation, groups);
  a.set("output_padding", std::vector<int64_t>{output_padding[0], output_padding[1]});
  return dispatch1(kConvTranspose2d, std::move(in), a);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, Int2 stride, Int2 padding,
                        Int2 output_padding, Int2 dilation, int64_t groups) {
  return conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation);
}

Tensor conv2d_backward_input(const Tensor& grad_y, const Tensor& w, const Shape& input_shape, Int2 stride,
                             Int2 padding, Int2 dilation, int64_t groups) {
  check_defined("conv2d_backward_input", grad_y, w);
  Attrs a = conv_attrs(stride, padding, dilation, groups);
  a.set("input_shape", input_shape);
  return dispatch1(kConv2dBackwardInput, {grad_y, w}, a);
}

Tensor conv2d_backward_weight(const Tensor& grad_y, const Tensor& x, const Shape& weight_shape, Int2 stride,
                              Int2 padding, Int2 dilation, int64_t groups) {
  check_defined("conv2d_backward_weight", grad_y, x);
  Attrs a = conv_attrs(stride, padding, dilation, groups);
  a.set("weight_shape", weight_shape);
  return dispatch1(kConv2dBackwardWeight, {grad_y, x}, a);
}

}  // namespace terra
