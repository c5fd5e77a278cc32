// Softmax on the CPU: rows in parallel, each a fixed function of its elements (the exponentials'
// sum in sum_row's fixed lanes), so the bits never depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/sum_loops.h"
#include "terra/backend/cpu/vector_math.h"
#include "terra/backend/softmax_kernels.h"

namespace terra::kernels {
namespace {

// A contiguous tensor seen as [outer, n, inner] around `dim`.
struct RowLayout {
  int64_t outer = 1, n = 1, inner = 1;
};
RowLayout layout_of(const Shape& s, int64_t dim) {
  RowLayout l;
  if (s.empty()) return l;
  for (int64_t d = 0; d < dim; ++d) l.outer *= s[size_t(d)];
  l.n = s[size_t(dim)];
  for (size_t d = size_t(dim) + 1; d < s.size(); ++d) l.inner *= s[d];
  return l;
}

// One contiguous row of n elements at x, into o: the max, the exponentials (vexp, the vector exp
// every kernel shares) and their sum in sum_row's fixed lanes, as plain loops that vectorize.
template <bool kLog, class T>
void softmax_row(const T* x, T* o, int64_t n, T* tmp) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j]);
  T* e = kLog ? tmp : o;
  for (int64_t j = 0; j < n; ++j) e[j] = cpu::any_exp(T(x[j] - m));
  const double s = cpu::sum_row<double>(e, n);
  if constexpr (kLog) {
    T lse = m + T(std::log(s));
    for (int64_t j = 0; j < n; ++j) o[j] = x[j] - lse;
  } else {
    T inv = T(1.0 / s);
    for (int64_t j = 0; j < n; ++j) o[j] *= inv;
  }
}

template <bool kLog>
void kernel_softmax_t(const KernelArgs& k) {
  Tensor x = cpu::contiguous_raw(k.in[0]);
  RowLayout l = layout_of(x.shape(), k.attrs.i("dim"));
  visit_floating(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* px = x.impl()->data_as<T>();
    T* po = k.out[0].impl()->data_as<T>();
    const int64_t rows = l.outer * l.inner, n = l.n, st = l.inner;
    cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      // Per chunk: the row's exponentials, and a strided row (a softmax over an inner dim) gathered
      // and its result, so strided and contiguous rows take the same arithmetic.
      std::vector<T> buf(static_cast<size_t>((st == 1 ? 1 : 3) * n));
      for (int64_t r = b; r < e; ++r) {
        const int64_t base = (r / st) * n * st + r % st;
        if (st == 1) {
          softmax_row<kLog>(px + base, po + base, n, buf.data());
          continue;
        }
        T *xr = buf.data() + n, *orow = xr + n;
        for (int64_t j = 0; j < n; ++j) xr[j] = px[base + j * st];
        softmax_row<kLog>(xr, orow, n, buf.data());
        for (int64_t j = 0; j < n; ++j) po[base + j * st] = orow[j];
      }
    });
  });
}

// One contiguous row of the backward: s = sum(g) (log_softmax) or sum(g * y) (softmax), in double
// over sum_row's fixed lanes, then o = g - exp(y) * s or o = y * (g - s).
template <bool kLog, class T>
void softmax_bw_row(const T* g, const T* y, T* o, int64_t n, double* prod) {
  double s;
  if constexpr (kLog) {
    s = cpu::sum_row<double>(g, n);
  } else {
    for (int64_t j = 0; j < n; ++j) prod[j] = double(g[j]) * double(y[j]);
    s = cpu::sum_row<double>(prod, n);
  }
  const T ts = T(s);
  if constexpr (kLog)
    for (int64_t j = 0; j < n; ++j) o[j] = g[j] - cpu::any_exp(y[j]) * ts;
  else
    for (int64_t j = 0; j < n; ++j) o[j] = y[j] * (g[j] - ts);
}

template <bool kLog>
void kernel_softmax_bw_t(const KernelArgs& k) {
  Tensor g = cpu::contiguous_raw(k.in[0]), y = cpu::contiguous_raw(k.in[1]);
  RowLayout l = layout_of(y.shape(), k.attrs.i("dim"));
  visit_floating(y.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pg = g.impl()->data_as<T>();
    const T* py = y.impl()->data_as<T>();
    T* po = k.out[0].impl()->data_as<T>();
    const int64_t rows = l.outer * l.inner, n = l.n, st = l.inner;
    const int64_t grain = std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(n, 1));
    cpu::parallel_for(rows, grain, [&](int64_t b, int64_t e) {
      std::vector<double> prod(static_cast<size_t>(n));
      std::vector<T> rows3(st == 1 ? 0 : size_t(3 * n));  // a strided row, gathered
      for (int64_t r = b; r < e; ++r) {
        const int64_t base = (r / st) * n * st + r % st;
        if (st == 1) {
          softmax_bw_row<kLog>(pg + base, py + base, po + base, n, prod.data());
          continue;
        }
        T *tg = rows3.data(), *ty = tg + n, *to = ty + n;
        for (int64_t j = 0; j < n; ++j) tg[j] = pg[base + j * st], ty[j] = py[base + j * st];
        softmax_bw_row<kLog>(tg, ty, to, n, prod.data());
        for (int64_t j = 0; j < n; ++j) po[base + j * st] = to[j];
      }
    });
  });
}

}  // namespace

void softmax(const KernelArgs& k) { kernel_softmax_t<false>(k); }
void log_softmax(const KernelArgs& k) { kernel_softmax_t<true>(k); }
void softmax_backward(const KernelArgs& k) { kernel_softmax_bw_t<false>(k); }
void log_softmax_backward(const KernelArgs& k) { kernel_softmax_bw_t<true>(k); }

}  // namespace terra::kernels
