// Fused cross-entropy: per row, the max, the log-sum-exp and the picked logit in one sweep of the
// logits (forward), and softmax - onehot scaled by the row's gradient in one more (backward).
// Rows are independent and reduced in row order afterwards, so results never depend on the thread
// count; within a row the sums use kLanes fixed lanes (element j in lane j % kLanes) so the loops
// vectorize with a summation order that depends only on the row length.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/vec_math.h"
#include "terra/backend/cross_entropy_kernels.h"

namespace terra::kernels {
namespace {

constexpr int kLanes = 8;

template <class T>
inline __attribute__((always_inline)) T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) return cpu::vexp(x);
  else return std::exp(x);
}
// `a > m ? a : m`: a NaN logit never becomes the max; it reaches the sum and makes the row NaN.
template <class T>
inline T max_of(T m, T a) {
  return a > m ? a : m;
}

// logsumexp of a contiguous row of c logits, accumulated in double.
template <class T>
double row_lse(const T* x, int64_t c) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T mx[kLanes];
  for (int l = 0; l < kLanes; ++l) mx[l] = kNegInf;
  int64_t j = 0;
  for (; j + kLanes <= c; j += kLanes)
    for (int l = 0; l < kLanes; ++l) mx[l] = max_of(mx[l], x[j + l]);
  T m = kNegInf;
  for (int l = 0; l < kLanes; ++l) m = max_of(m, mx[l]);
  for (int64_t i = j; i < c; ++i) m = max_of(m, x[i]);
  double acc[kLanes] = {};
  j = 0;
  for (; j + kLanes <= c; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += double(exp_of<T>(x[j + l] - m));
  double s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  for (int64_t i = j; i < c; ++i) s += double(exp_of<T>(x[i] - m));
  return double(m) + std::log(s);
}

// logsumexp of the r rows of one [c, r] block (class stride r), vectorized across the rows.
template <class T>
void block_lse(const T* x, int64_t c, int64_t r, double* out, std::vector<T>& m, std::vector<double>& s) {
  m.assign(size_t(r), -std::numeric_limits<T>::infinity());
  s.assign(size_t(r), 0.0);
  for (int64_t j = 0; j < c; ++j)
    for (int64_t i = 0; i < r; ++i) m[size_t(i)] = max_of(m[size_t(i)], x[j * r + i]);
  for (int64_t j = 0; j < c; ++j)
    for (int64_t i = 0; i < r; ++i) s[size_t(i)] += double(exp_of<T>(x[j * r + i] - m[size_t(i)]));
  for (int64_t i = 0; i < r; ++i) out[i] = double(m[size_t(i)]) + std::log(s[size_t(i)]);
}

template <class T>
void forward_t(const Tensor& x, const Tensor& targets, const XentShape& s, Tensor& loss, Tensor& lse) {
  const T* px = x.impl()->data_as<T>();
  const int64_t* pt = targets.impl()->data_as<int64_t>();
  T* pl = lse.impl()->data_as<T>();
  const int64_t rows = s.n * s.r;
  std::vector<double> row_loss(static_cast<size_t>(rows));  // lse - x[target] in double; 0 when ignored
  if (s.r == 1) {
    cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(s.c, 1)), [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n) {
        const T* row = px + n * s.c;
        double v = row_lse(row, s.c);
        pl[n] = T(v);
        int64_t t = pt[n];
        row_loss[size_t(n)] = t == s.ignore ? 0.0 : v - double(row[t]);
      }
    });
  } else {
    const int64_t block = s.c * s.r;
    cpu::parallel_for(s.n, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(block, 1)), [&](int64_t b, int64_t e) {
      std::vector<T> m;
      std::vector<double> sum, v(size_t(s.r));
      for (int64_t n = b; n < e; ++n) {
        block_lse(px + n * block, s.c, s.r, v.data(), m, sum);
        for (int64_t i = 0; i < s.r; ++i) {
          int64_t q = n * s.r + i, t = pt[q];
          pl[q] = T(v[size_t(i)]);
          row_loss[size_t(q)] = t == s.ignore ? 0.0 : v[size_t(i)] - double(px[n * block + t * s.r + i]);
        }
      }
    });
  }
  T* po = loss.impl()->data_as<T>();
  if (s.reduction == 0) {
    for (int64_t q = 0; q < rows; ++q) po[q] = T(row_loss[size_t(q)]);
    return;
  }
  double total = 0;
  for (int64_t q = 0; q < rows; ++q) total += row_loss[size_t(q)];
  // 0/0 = NaN when every target is ignored, as torch.
  po[0] = s.reduction == 1 ? T(total / double(s.used)) : T(total);
}

template <class T>
void backward_t(const Tensor& grad, const Tensor& x, const Tensor& targets, const Tensor& lse, const XentShape& s,
                Tensor& out) {
  const T* pg = grad.impl()->data_as<T>();
  const T* px = x.impl()->data_as<T>();
  const T* pl = lse.impl()->data_as<T>();
  const int64_t* pt = targets.impl()->data_as<int64_t>();
  T* po = out.impl()->data_as<T>();
  const T k = s.reduction == 1 ? T(1.0 / double(s.used)) : T(1);
  auto scale = [&](int64_t q) { return (s.reduction == 0 ? pg[q] : pg[0]) * k; };
  const int64_t block = s.c * s.r;
  cpu::parallel_for(s.n, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(block, 1)), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const T* xb = px + n * block;
      T* ob = po + n * block;
      if (s.r == 1) {
        int64_t t = pt[n];
        if (t == s.ignore) {
          for (int64_t j = 0; j < s.c; ++j) ob[j] = T(0);
          continue;
        }
        const T g = scale(n), l = pl[n];
        for (int64_t j = 0; j < s.c; ++j) ob[j] = exp_of<T>(xb[j] - l) * g;
        ob[t] = (exp_of<T>(xb[t] - l) - T(1)) * g;
        continue;
      }
      for (int64_t j = 0; j < s.c; ++j)
        for (int64_t i = 0; i < s.r; ++i) {
          int64_t q = n * s.r + i;
          ob[j * s.r + i] = pt[q] == s.ignore ? T(0) : exp_of<T>(xb[j * s.r + i] - pl[q]) * scale(q);
        }
      for (int64_t i = 0; i < s.r; ++i) {
        int64_t q = n * s.r + i, t = pt[q];
        if (t != s.ignore) ob[t * s.r + i] = (exp_of<T>(xb[t * s.r + i] - pl[q]) - T(1)) * scale(q);
      }
    }
  });
}

}  // namespace

void cross_entropy_forward(const Tensor& x, const Tensor& targets, const XentShape& s, Tensor& loss, Tensor& lse) {
  visit_floating(x.dtype(), [&](auto z) { forward_t<decltype(z)>(x, targets, s, loss, lse); });
}

void cross_entropy_backward(const Tensor& grad, const Tensor& x, const Tensor& targets, const Tensor& lse,
                            const XentShape& s, Tensor& out) {
  visit_floating(x.dtype(), [&](auto z) { backward_t<decltype(z)>(grad, x, targets, lse, s, out); });
}

}  // namespace terra::kernels
