#include "terra/ops/random_ops.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/backend/cpu/loops.h"
#include "terra/core/dispatch.h"
#include "terra/core/random.h"
#include "terra/ops/arithmetic.h"

namespace terra {
namespace {

[[noreturn]] void bad(const char* op, const std::string& msg) {
  throw std::invalid_argument(std::string("[") + op + "] " + msg);
}

void check_shape(const char* op, const Shape& s) {
  for (int64_t d : s)
    if (d < 0) bad(op, "negative dimension in shape " + shape_str(s));
}

void check_prob(const char* op, double p) {
  if (!(p >= 0.0 && p <= 1.0)) bad(op, "probability must be in [0, 1], got " + std::to_string(p));
}

// Writes f(i) for every element of a freshly allocated contiguous output, in parallel.
template <class T, class F>
void fill_indexed(const Tensor& out, F f) {
  T* p = out.impl()->data_as<T>();
  cpu::parallel_for(out.numel(), cpu::kGrain / 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = f(uint64_t(i));
  });
}

TensorMetas infer_factory(const char* op, const Attrs& a, bool floating_only) {
  check_shape(op, a.ints("shape"));
  DType d = a.dtype("dtype");
  if (floating_only && !is_floating(d)) bad(op, std::string("needs a floating dtype, got ") + dtype_name(d));
  return {{a.ints("shape"), d}};
}

// ---- rand / randn: attrs shape, dtype.
TensorMetas infer_rand(std::span<const Tensor>, const Attrs& a) { return infer_factory("rand", a, true); }
TensorMetas infer_randn(std::span<const Tensor>, const Attrs& a) {
  return infer_factory("randn", a, true);
}
void kernel_rand(const KernelArgs& k) {
  PhiloxKey key = k.rng;
  if (k.out[0].dtype() == DType::Float64) fill_indexed<double>(k.out[0], [key](uint64_t i) { return uniform64_at(key, i); });
  else fill_indexed<float>(k.out[0], [key](uint64_t i) { return uniform_at(key, i); });
}
void kernel_randn(const KernelArgs& k) {
  PhiloxKey key = k.rng;
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    fill_indexed<T>(k.out[0], [key](uint64_t i) { return T(normal_at(key, i)); });
  });
}

// ---- randint: attrs low, high, shape.
TensorMetas infer_randint(std::span<const Tensor>, const Attrs& a) {
  check_shape("randint", a.ints("shape"));
  if (a.i("high") <= a.i("low"))
    bad("randint", "high " + std::to_string(a.i("high")) + " must be greater than low " + std::to_string(a.i("low")));
  return {{a.ints("shape"), DType::Int64}};
}
void kernel_randint(const KernelArgs& k) {
  PhiloxKey key = k.rng;
  int64_t low = k.attrs.i("low");
  uint64_t range = uint64_t(k.attrs.i("high") - low);
  fill_indexed<int64_t>(k.out[0], [=](uint64_t i) {
    auto r = philox(key.seed, key.offset + i);
    uint64_t bits = (uint64_t(r[0]) << 32) | r[1];
    return low + int64_t(bits % range);  // bias below 2^-32 for ranges under 2^32
  });
}

// ---- bernoulli(probs): input probs.
TensorMetas infer_bernoulli(std::span<const Tensor> in, const Attrs&) {
  if (!is_floating(in[0].dtype()))
    bad("bernoulli", std::string("probs must be floating, got ") + dtype_name(in[0].dtype()) + " of shape " +
                         shape_str(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}
// One message for the kernel and the call-site check (dispatch runs it when probs are host data).
void check_probs(std::span<const Tensor> in, const Attrs&) {
  Tensor p = cpu::contiguous_raw(in[0]);
  visit_floating(p.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pp = p.impl()->data_as<T>();
    for (int64_t i = 0; i < p.numel(); ++i)
      if (!(pp[i] >= T(0) && pp[i] <= T(1)))
        bad("bernoulli", "probability " + std::to_string(double(pp[i])) + " at position " + std::to_string(i) +
                             " is outside [0, 1]");
  });
}
void kernel_bernoulli(const KernelArgs& k) {
  check_probs(k.in, k.attrs);  // before the parallel pass (it may not throw)
  Tensor p = cpu::contiguous_raw(k.in[0]);
  PhiloxKey key = k.rng;
  visit_floating(p.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pp = p.impl()->data_as<T>();
    fill_indexed<T>(k.out[0], [&](uint64_t i) { return uniform64_at(key, i) < double(pp[i]) ? T(1) : T(0); });
  });
}

// ---- bernoulli_p / dropout_mask: attrs shape, p, dtype (no inputs).
TensorMetas infer_bernoulli_p(std::span<const Tensor>, const Attrs& a) {
  check_prob("bernoulli", a.f("p"));
  return infer_factory("bernoulli", a, false);
}
void kernel_bernoulli_p(const KernelArgs& k) {
  PhiloxKey key = k.rng;
  double p = k.attrs.f("p");
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    fill_indexed<T>(k.out[0], [=](uint64_t i) { return uniform64_at(key, i) < p ? T(1) : T(0); });
  });
}
TensorMetas infer_dropout_mask(std::span<const Tensor>, const Attrs& a) {
  check_prob("dropout", a.f("p"));
  return infer_factory("dropout", a, true);
}
void kernel_dropout_mask(const KernelArgs& k) {
  PhiloxKey key = k.rng;
  double p = k.attrs.f("p");
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    T scale = p < 1.0 ? T(1.0 / (1.0 - p)) : T(0);
    fill_indexed<T>(k.out[0], [=](uint64_t i) { return uniform64_at(key, i) < p ? T(0) : scale; });
  });
}

const OpDef kRand{.name = "rand", .flags = kRandom, .infer = infer_rand, .kernel = kernel_rand};
const OpDef kRandn{.name = "randn", .flags = kRandom, .infer = infer_randn, .kernel = kernel_randn};
const OpDef kRandint{.name = "randint", .flags = kRandom | kNoGrad, .infer = infer_randint,
                     .kernel = kernel_randint};
// No gradient: a sample does not depend differentiably on its probability.
const OpDef kBernoulli{.name = "bernoulli", .flags = kRandom, .infer = infer_bernoulli, .kernel = kernel_bernoulli,
                       .check_values = check_probs, .check_inputs = 1u};
const OpDef kBernoulliP{.name = "bernoulli_p", .flags = kRandom, .infer = infer_bernoulli_p,
                        .kernel = kernel_bernoulli_p};
const OpDef kDropoutMask{.name = "dropout_mask", .flags = kRandom, .infer = infer_dropout_mask,
                         .kernel = kernel_dropout_mask};
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
  if (!probs.defined()) bad("bernoulli", "probs is undefined");
  return dispatch1(kBernoulli, {probs});
}
Tensor bernoulli(Shape shape, double p, DType dtype) {
  return dispatch1(kBernoulliP, {}, Attrs{{"shape", std::move(shape)}, {"p", p}, {"dtype", dtype}});
}
Tensor dropout_mask(Shape shape, double p, DType dtype) {
  return dispatch1(kDropoutMask, {}, Attrs{{"shape", std::move(shape)}, {"p", p}, {"dtype", dtype}});
}

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!x.defined()) bad("dropout", "input is undefined");
  check_prob("dropout", p);
  if (!is_floating(x.dtype()))
    bad("dropout", std::string("input must be floating, got ") + dtype_name(x.dtype()) + " of shape " +
                       shape_str(x.shape()));
  if (!training || p == 0.0) return x;
  return mul(x, dropout_mask(x.shape(), p, x.dtype()));
}

}  // namespace terra
