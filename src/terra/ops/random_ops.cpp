#include "terra/ops/random_ops.h"

#include <stdexcept>
#include <string>

#include "terra/backend/random_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/core/errors.h"
#include "terra/ops/arithmetic.h"

namespace terra {
namespace {

void check_shape(const char* op, const Shape& s) {
  for (int64_t d : s)
    if (d < 0) op_error(op, "negative dimension in shape " + shape_str(s));
}

void check_prob(const char* op, double p) {
  if (!(p >= 0.0 && p <= 1.0)) op_error(op, "probability must be in [0, 1], got " + std::to_string(p));
}

TensorMetas infer_factory(const char* op, const Attrs& a, bool floating_only) {
  check_shape(op, a.ints("shape"));
  DType d = a.dtype("dtype");
  if (floating_only && !is_floating(d)) op_error(op, std::string("needs a floating dtype, got ") + dtype_name(d));
  return {{a.ints("shape"), d}};
}

// ---- rand / randn: attrs shape, dtype.
TensorMetas infer_rand(std::span<const Tensor>, const Attrs& a) { return infer_factory("rand", a, true); }
TensorMetas infer_randn(std::span<const Tensor>, const Attrs& a) {
  return infer_factory("randn", a, true);
}

// ---- randint: attrs low, high, shape.
TensorMetas infer_randint(std::span<const Tensor>, const Attrs& a) {
  check_shape("randint", a.ints("shape"));
  if (a.i("high") <= a.i("low"))
    op_error("randint",
             "high " + std::to_string(a.i("high")) + " must be greater than low " + std::to_string(a.i("low")));
  return {{a.ints("shape"), DType::Int64}};
}

// ---- bernoulli(probs): input probs.
TensorMetas infer_bernoulli(std::span<const Tensor> in, const Attrs&) {
  if (!is_floating(in[0].dtype()))
    op_error("bernoulli", std::string("probs must be floating, got ") + dtype_name(in[0].dtype()) + " of shape " +
                              shape_str(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}

// ---- bernoulli_p / dropout_mask: attrs shape, p, dtype (no inputs).
TensorMetas infer_bernoulli_p(std::span<const Tensor>, const Attrs& a) {
  check_prob("bernoulli", a.f("p"));
  return infer_factory("bernoulli", a, false);
}
TensorMetas infer_dropout_mask(std::span<const Tensor>, const Attrs& a) {
  check_prob("dropout", a.f("p"));
  return infer_factory("dropout", a, true);
}

const OpDef kRand{.name = "rand", .flags = kRandom, .infer = infer_rand, .kernel = kernels::rand};
const OpDef kRandn{.name = "randn", .flags = kRandom, .infer = infer_randn, .kernel = kernels::randn};
const OpDef kRandint{.name = "randint", .flags = kRandom | kNoGrad, .infer = infer_randint,
                     .kernel = kernels::randint};
// No gradient: a sample does not depend differentiably on its probability.
const OpDef kBernoulli{.name = "bernoulli", .flags = kRandom, .infer = infer_bernoulli, .kernel = kernels::bernoulli,
                       .check_values = kernels::bernoulli_values, .check_inputs = 1u};
const OpDef kBernoulliP{.name = "bernoulli_p", .flags = kRandom, .infer = infer_bernoulli_p,
                        .kernel = kernels::bernoulli_p};
const OpDef kDropoutMask{.name = "dropout_mask", .flags = kRandom, .infer = infer_dropout_mask,
                         .kernel = kernels::dropout_mask};
OpRegistrar r1(kRand), r2(kRandn), r3(kRandint), r4(kBernoulli), r5(kBernoulliP), r6(kDropoutMask);

}  // namespace

Tensor rand(Shape shape, DType dtype) {
  return dispatch1(kRand, {}, Attrs{{"shape", std::move(shape)}, {"dtype", dtype}});
}
Tensor randn(Shape shape, DType dtype) {
  return dispatch1(kRandn, {}, Attrs{{"shape", std::move(shape)}, {"dtype", dtype}});
}
Tensor randint(int64_t low, int64_t high, Shape shape) {
  return dispatch1(kRandint, {}, Attrs{{"low", low}, {"high", high}, {"shape", std::move(shape)}});
}
Tensor bernoulli(const Tensor& probs) {
  if (!probs.defined()) op_error("bernoulli", "probs is undefined");
  return dispatch1(kBernoulli, {probs});
}
Tensor bernoulli(Shape shape, double p, DType dtype) {
  return dispatch1(kBernoulliP, {}, Attrs{{"shape", std::move(shape)}, {"p", p}, {"dtype", dtype}});
}
Tensor dropout_mask(Shape shape, double p, DType dtype) {
  return dispatch1(kDropoutMask, {}, Attrs{{"shape", std::move(shape)}, {"p", p}, {"dtype", dtype}});
}

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!x.defined()) op_error("dropout", "input is undefined");
  check_prob("dropout", p);
  if (!is_floating(x.dtype()))
    op_error("dropout",
             std::string("input must be floating, got ") + dtype_name(x.dtype()) + " of shape " + shape_str(x.shape()));
  if (!training || p == 0.0) return x;
  return mul(x, dropout_mask(x.shape(), p, x.dtype()));
}

}  // namespace terra
