// max/min, argmax/argmin and var on the CPU: one reduce_rows row per output (backend/cpu/loops.h).
#include <vector>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/reduce_stats_kernels.h"

namespace terra::kernels {
namespace {

// Index of the first extreme element of a row; a NaN wins (first one), as torch.
template <bool Max, class T>
int64_t extreme_index(const T* row, int64_t n) {
  int64_t best = 0;
  T bv = row[0];
  if (bv != bv) return 0;
  for (int64_t j = 1; j < n; ++j) {
    T v = row[j];
    if (v != v) return j;
    if (Max ? v > bv : v < bv) {
      bv = v;
      best = j;
    }
  }
  return best;
}

template <bool Max>
void kernel_extreme_all(const KernelArgs& k) {
  const Tensor& x = k.in[0];
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  visit_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    T* o = k.out[0].impl()->data_as<T>();
    cpu::reduce_rows<T>(x, dims, [&](const T* row, int64_t n, int64_t) { o[0] = row[extreme_index<Max>(row, n)]; });
  });
}

// Writes values to out[0] (when `values`) and indices to out[values ? 1 : 0].
template <bool Max, bool Values>
void kernel_extreme_dim(const KernelArgs& k) {
  const Tensor& x = k.in[0];
  visit_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    T* vals = Values ? k.out[0].impl()->data_as<T>() : nullptr;
    int64_t* idx = k.out[Values ? 1 : 0].impl()->data_as<int64_t>();
    cpu::reduce_rows<T>(x, {k.attrs.i("dim")}, [&](const T* row, int64_t n, int64_t i) {
      int64_t j = extreme_index<Max>(row, n);
      if constexpr (Values) vals[i] = row[j];
      idx[i] = j;
    });
  });
}

}  // namespace

void max_all(const KernelArgs& k) { kernel_extreme_all<true>(k); }
void min_all(const KernelArgs& k) { kernel_extreme_all<false>(k); }
void max_dim(const KernelArgs& k) { kernel_extreme_dim<true, true>(k); }
void min_dim(const KernelArgs& k) { kernel_extreme_dim<false, true>(k); }
void argmax(const KernelArgs& k) { kernel_extreme_dim<true, false>(k); }
void argmin(const KernelArgs& k) { kernel_extreme_dim<false, false>(k); }

// Two passes in double per row: mean, then squared deviations (stable for large offsets).
void var(const KernelArgs& k) {
  const Tensor& x = k.in[0];
  const double ddof = k.attrs.b("unbiased") ? 1.0 : 0.0;
  visit_floating(x.dtype(), [&](auto z) {
    using T = decltype(z);
    T* o = k.out[0].impl()->data_as<T>();
    cpu::reduce_rows<T>(x, k.attrs.ints("dims"), [&](const T* row, int64_t n, int64_t i) {
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += double(row[j]);
      const double m = s / double(n);
      double q = 0;
      for (int64_t j = 0; j < n; ++j) {
        double d = double(row[j]) - m;
        q += d * d;
      }
      o[i] = T(q / (double(n) - ddof));
    });
  });
}

}  // namespace terra::kernels
