#include "terra/ops/norm.h"

#include <stdexcept>
#include <string>

#include "terra/autograd/grad_mode.h"
#include "terra/backend/norm_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/ops/arithmetic.h"

namespace terra {
namespace {

void check_param(const char* op, const char* what, const Tensor& p, const Tensor& x, const Shape& want) {
  if (!p.defined()) return;
  if (p.shape() != want)
    throw std::invalid_argument(std::string("[") + op + "] " + what + " of shape " + shape_str(p.shape()) +
                                " does not match input of shape " + shape_str(x.shape()) + " (expected " +
                                shape_str(want) + ")");
  if (p.dtype() != x.dtype())
    throw std::invalid_argument(std::string("[") + op + "] " + what + " has dtype " + dtype_name(p.dtype()) +
                                " but input has dtype " + dtype_name(x.dtype()));
}

void check_float(const char* op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string("[") + op + "] input must be float32 or float64, got " +
                                dtype_name(x.dtype()));
}

// ---------------------------------------------------------------- batch_norm
TensorMetas infer_batch_norm(std::span<const Tensor> in, const Attrs& a) {
  const Tensor& x = in[0];
  check_float("batch_norm", x);
  if (x.dim() < 2)
    throw std::invalid_argument("[batch_norm] input must have at least 2 dims [N, C, ...], got shape " +
                                shape_str(x.shape()));
  const bool hw = a.b("has_weight"), hb = a.b("has_bias"), run = a.b("use_running");
  size_t want = 1 + hw + hb + 2 * run;
  if (in.size() != want) throw std::invalid_argument("[batch_norm] internal: wrong number of inputs");
  Shape c{x.shape()[1]};
  if (hw) check_param("batch_norm", "weight", in[1], x, c);
  if (hb) check_param("batch_norm", "bias", in[1 + hw], x, c);
  if (run) {
    check_param("batch_norm", "running_mean", in[1 + hw + hb], x, c);
    check_param("batch_norm", "running_var", in[2 + hw + hb], x, c);
  } else if (numel_of(x.shape()) / std::max<int64_t>(c[0], 1) <= 1) {
    throw std::invalid_argument("[batch_norm] expected more than 1 value per channel when training, got input of shape " +
                                shape_str(x.shape()));
  }
  return {{x.shape(), x.dtype()}, {c, x.dtype()}, {c, x.dtype()}};
}

TensorList grad_batch_norm(const GradArgs& g) {
  if (!g.grad_out[0].defined()) return {};  // only the saved statistics were used downstream
  const bool hw = g.attrs.b("has_weight"), hb = g.attrs.b("has_bias"), run = g.attrs.b("use_running");
  std::vector<Tensor> r = batch_norm_backward(g.grad_out[0], g.in[0], g.out[1], g.out[2], hw ? g.in[1] : Tensor(), run);
  TensorList out{r[0]};
  if (hw) out.push_back(r[1]);
  if (hb) out.push_back(r[2]);
  return out;  // running statistics get no gradient
}

TensorMetas infer_stats_backward(const char* op, std::span<const Tensor> in, const Shape& stat,
                                 const Shape& param, bool hw) {
  const Tensor &gy = in[0], &x = in[1];
  if (gy.shape() != x.shape() || gy.dtype() != x.dtype())
    throw std::invalid_argument(std::string("[") + op + "] output gradient of shape " + shape_str(gy.shape()) +
                                " does not match input of shape " + shape_str(x.shape()));
  check_param(op, "save_mean", in[2], x, stat);
  check_param(op, "save_invstd", in[3], x, stat);
  if (in.size() != size_t(4 + hw)) throw std::invalid_argument(std::string("[") + op + "] internal: wrong number of inputs");
  if (hw) check_param(op, "weight", in[4], x, param);
  return {{x.shape(), x.dtype()}, {param, x.dtype()}, {param, x.dtype()}};
}

TensorMetas infer_batch_norm_backward(std::span<const Tensor> in, const Attrs& a) {
  if (in[1].dim() < 2)
    throw std::invalid_argument("[batch_norm_backward] input must have at least 2 dims, got shape " +
                                shape_str(in[1].shape()));
  Shape c{in[1].shape()[1]};
  return infer_stats_backward("batch_norm_backward", in, c, c, a.b("has_weight"));
}

// ---------------------------------------------------------------- layer_norm
Shape outer_shape(const char* op, const Tensor& x, const Shape& ns) {
  if (ns.empty()) throw std::invalid_argument(std::string("[") + op + "] normalized_shape must not be empty");
  if (x.dim() < int64_t(ns.size()) || !std::equal(ns.begin(), ns.end(), x.shape().end() - int64_t(ns.size())))
    throw std::invalid_argument(std::string("[") + op + "] normalized_shape " + shape_str(ns) +
                                " does not match the trailing dims of input of shape " + shape_str(x.shape()));
  return Shape(x.shape().begin(), x.shape().end() - int64_t(ns.size()));
}

TensorMetas infer_layer_norm(std::span<const Tensor> in, const Attrs& a) {
  const Tensor& x = in[0];
  check_float("layer_norm", x);
  const Shape& ns = a.ints("normalized_shape");
  Shape outer = outer_shape("layer_norm", x, ns);
  const bool hw = a.b("has_weight"), hb = a.b("has_bias");
  if (in.size() != size_t(1 + hw + hb)) throw std::invalid_argument("[layer_norm] internal: wrong number of inputs");
  if (hw) check_param("layer_norm", "weight", in[1], x, ns);
  if (hb) check_param("layer_norm", "bias", in[1 + hw], x, ns);
  return {{x.shape(), x.dtype()}, {outer, x.dtype()}, {outer, x.dtype()}};
}

TensorList grad_layer_norm(const GradArgs& g) {
  if (!g.grad_out[0].defined()) return {};
  const bool hw = g.attrs.b("has_weight"), hb = g.attrs.b("has_bias");
  std::vector<Tensor> r = layer_norm_backward(g.grad_out[0], g.in[0], g.out[1], g.out[2], hw ? g.in[1] : Tensor(),
                                              g.attrs.ints("normalized_shape"));
  TensorList out{r[0]};
  if (hw) out.push_back(r[1]);
  if (hb) out.push_back(r[2]);
  return out;
}

TensorMetas infer_layer_norm_backward(std::span<const Tensor> in, const Attrs& a) {
  const Shape& ns = a.ints("normalized_shape");
  Shape outer = outer_shape("layer_norm_backward", in[1], ns);
  return infer_stats_backward("layer_norm_backward", in, outer, ns, a.b("has_weight"));
}

const OpDef kBatchNorm{.name = "batch_norm", .flags = kSaveInputs | kSaveOutputs, .infer = infer_batch_norm,
                       .kernel = kernels::batch_norm, .grad = grad_batch_norm};
const OpDef kBatchNormBwd{.name = "batch_norm_backward", .infer = infer_batch_norm_backward,
                          .kernel = kernels::batch_norm_backward};
const OpDef kLayerNorm{.name = "layer_norm", .flags = kSaveInputs | kSaveOutputs, .infer = infer_layer_norm,
                       .kernel = kernels::layer_norm, .grad = grad_layer_norm};
const OpDef kLayerNormBwd{.name = "layer_norm_backward", .infer = infer_layer_norm_backward,
                          .kernel = kernels::layer_norm_backward};
OpRegistrar r1(kBatchNorm), r2(kBatchNormBwd), r3(kLayerNorm), r4(kLayerNormBwd);

}  // namespace

std::vector<Tensor> batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                       const Tensor& running_mean, const Tensor& running_var, bool use_running,
                                       double eps) {
  if (!x.defined()) throw std::invalid_argument("[batch_norm] input is undefined");
  if (use_running && (!running_mean.defined() || !running_var.defined()))
    throw std::invalid_argument("[batch_norm] using running statistics needs both running_mean and running_var");
  std::vector<Tensor> in{x};
  if (weight.defined()) in.push_back(weight);
  if (bias.defined()) in.push_back(bias);
  if (use_running) {
    in.push_back(running_mean);
    in.push_back(running_var);
  }
  return dispatch(kBatchNorm, std::move(in),
                  Attrs{{"eps", eps}, {"has_weight", weight.defined()}, {"has_bias", bias.defined()},
                        {"use_running", use_running}});
}

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps) {
  if (!x.defined()) throw std::invalid_argument("[batch_norm] input is undefined");
  if (running_mean.defined() != running_var.defined())
    throw std::invalid_argument("[batch_norm] running_mean and running_var must both be defined or both undefined");
  const bool have_running = running_mean.defined();
  if (!training && !have_running) training = true;  // no running statistics: batch statistics, as torch
  std::vector<Tensor> r = batch_norm_forward(x, weight, bias, running_mean, running_var, !training, eps);
  if (training && have_running) {
    // infer validated x; now the buffers (they were not inputs of the forward op).
    Shape c{x.shape()[1]};
    check_param("batch_norm", "running_mean", running_mean, x, c);
    check_param("batch_norm", "running_var", running_var, x, c);
    NoGradGuard ng;
    const double M = double(x.numel() / c[0]);
    Tensor mean = r[1].detach(), inv = r[2].detach();
    Tensor var_unbiased = (1.0 / (inv * inv) - eps) * (M / (M - 1.0));
    running_mean.mul_(1.0 - momentum).add_(mean * momentum);
    running_var.mul_(1.0 - momentum).add_(var_unbiased * momentum);
  }
  return r[0];
}

std::vector<Tensor> batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& save_mean,
                                        const Tensor& save_invstd, const Tensor& weight, bool use_running) {
  std::vector<Tensor> in{grad_y, x, save_mean, save_invstd};
  if (weight.defined()) in.push_back(weight);
  return dispatch(kBatchNormBwd, std::move(in),
                  Attrs{{"has_weight", weight.defined()}, {"use_running", use_running}});
}

std::vector<Tensor> layer_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                       const Tensor& bias, double eps) {
  if (!x.defined()) throw std::invalid_argument("[layer_norm] input is undefined");
  std::vector<Tensor> in{x};
  if (weight.defined()) in.push_back(weight);
  if (bias.defined()) in.push_back(bias);
  return dispatch(kLayerNorm, std::move(in),
                  Attrs{{"normalized_shape", normalized_shape}, {"eps", eps}, {"has_weight", weight.defined()},
                        {"has_bias", bias.defined()}});
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return layer_norm_forward(x, normalized_shape, weight, bias, eps)[0];
}

std::vector<Tensor> layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& save_mean,
                                        const Tensor& save_invstd, const Tensor& weight,
                                        const Shape& normalized_shape) {
  std::vector<Tensor> in{grad_y, x, save_mean, save_invstd};
  if (weight.defined()) in.push_back(weight);
  return dispatch(kLayerNormBwd, std::move(in),
                  Attrs{{"normalized_shape", normalized_shape}, {"has_weight", weight.defined()}});
}

}  // namespace terra
