// Random draws on the CPU: every element is a pure function of (key, index), filled in parallel.
#include <stdexcept>
#include <string>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/random_kernels.h"
#include "terra/core/errors.h"
#include "terra/core/random.h"

namespace terra::kernels {
namespace {

// Writes f(i) for every element of a freshly allocated contiguous output, in parallel.
template <class T, class F>
void fill_indexed(const Tensor& out, F f) {
  T* p = out.impl()->data_as<T>();
  cpu::parallel_for(out.numel(), cpu::kGrain / 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = f(uint64_t(i));
  });
}

}  // namespace

void rand(const KernelArgs& k) {
  PhiloxKey key = k.rng;
  if (k.out[0].dtype() == DType::Float64) fill_indexed<double>(k.out[0], [key](uint64_t i) { return uniform64_at(key, i); });
  else fill_indexed<float>(k.out[0], [key](uint64_t i) { return uniform_at(key, i); });
}
void randn(const KernelArgs& k) {
  PhiloxKey key = k.rng;
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    fill_indexed<T>(k.out[0], [key](uint64_t i) { return T(normal_at(key, i)); });
  });
}

void randint(const KernelArgs& k) {
  PhiloxKey key = k.rng;
  int64_t low = k.attrs.i("low");
  uint64_t range = uint64_t(k.attrs.i("high") - low);
  fill_indexed<int64_t>(k.out[0], [=](uint64_t i) {
    auto r = philox(key.seed, key.offset + i);
    uint64_t bits = (uint64_t(r[0]) << 32) | r[1];
    return low + int64_t(bits % range);  // bias below 2^-32 for ranges under 2^32
  });
}

// One message for the kernel and the call-site check (dispatch runs it when probs are host data).
void bernoulli_values(std::span<const Tensor> in, const Attrs&) {
  Tensor p = cpu::contiguous_raw(in[0]);
  visit_floating(p.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pp = p.impl()->data_as<T>();
    for (int64_t i = 0; i < p.numel(); ++i)
      if (!(pp[i] >= T(0) && pp[i] <= T(1)))
        op_error("bernoulli", "probability " + std::to_string(double(pp[i])) + " at position " + std::to_string(i) +
                                  " is outside [0, 1]");
  });
}
void bernoulli(const KernelArgs& k) {
  bernoulli_values(k.in, k.attrs);  // before the parallel pass (it may not throw)
  Tensor p = cpu::contiguous_raw(k.in[0]);
  PhiloxKey key = k.rng;
  visit_floating(p.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pp = p.impl()->data_as<T>();
    fill_indexed<T>(k.out[0], [&](uint64_t i) { return uniform64_at(key, i) < double(pp[i]) ? T(1) : T(0); });
  });
}

void bernoulli_p(const KernelArgs& k) {
  PhiloxKey key = k.rng;
  double p = k.attrs.f("p");
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    fill_indexed<T>(k.out[0], [=](uint64_t i) { return uniform64_at(key, i) < p ? T(1) : T(0); });
  });
}
void dropout_mask(const KernelArgs& k) {
  PhiloxKey key = k.rng;
  double p = k.attrs.f("p");
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    T scale = p < 1.0 ? T(1.0 / (1.0 - p)) : T(0);
    fill_indexed<T>(k.out[0], [=](uint64_t i) { return uniform64_at(key, i) < p ? T(0) : scale; });
  });
}

}  // namespace terra::kernels
