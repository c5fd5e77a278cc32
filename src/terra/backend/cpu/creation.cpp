// Creation on the CPU: fills of a freshly allocated contiguous output.
#include <algorithm>
#include <cstdint>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/creation_kernels.h"

namespace terra::kernels {

void full(const KernelArgs& k) {
  double v = k.attrs.f("value");
  TensorImpl& o = *k.out[0].impl();
  visit_dtype(o.dtype, [&](auto z) {
    using T = decltype(z);
    T* p = o.data_as<T>();
    T val = static_cast<T>(v);
    cpu::parallel_for(o.numel, cpu::kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = val;
    });
  });
}

void arange(const KernelArgs& k) {
  int64_t s = k.attrs.i("start"), st = k.attrs.i("step");
  TensorImpl& o = *k.out[0].impl();
  visit_dtype(o.dtype, [&](auto z) {
    using T = decltype(z);
    T* p = o.data_as<T>();
    // Unsigned: i * st alone may not fit in int64 even though s + i * st (within the range) does.
    for (int64_t i = 0; i < o.numel; ++i) p[i] = static_cast<T>(int64_t(uint64_t(s) + uint64_t(i) * uint64_t(st)));
  });
}

void eye(const KernelArgs& k) {
  TensorImpl& o = *k.out[0].impl();
  int64_t n = o.shape[0], m = o.shape[1];
  visit_dtype(o.dtype, [&](auto z) {
    using T = decltype(z);
    T* p = o.data_as<T>();
    for (int64_t i = 0; i < n * m; ++i) p[i] = T(0);
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = T(1);
  });
}

}  // namespace terra::kernels
