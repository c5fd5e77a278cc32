// Fused cross-entropy: per row, the max, the log-sum-exp and the picked logit in one sweep of the
// logits (forward), and softmax - onehot scaled by the row's gradient in one more (backward).
// Rows are independent and reduced in row order afterwards, so results never depend on the thread
// count; within a row the sums use kLanes fixed lanes (element j in lane j % kLanes), vectorized
// with a summation order that depends only on the row length.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/cross_entropy_kernels.h"

namespace terra::kernels {
namespace {

constexpr int kLanes = 8;

// glibc's expf/exp: scalar calls, but on this code they measured faster than the inlined
// polynomial of the activation kernels (which GCC leaves scalar and branchy here), and accurate.
template <class T>
inline T exp_of(T x) {
  return std::exp(x);
}
// `a > m ? a : m`: a NaN logit never becomes the max; it reaches the sum and makes the row NaN.
template <class T>
inline T max_of(T m, T a) {
  return a > m ? a : m;
}

// GCC vector types: the lanes below are explicit, so the summation order is fixed by the code
// (not by what the vectorizer chose) and the loops still run 8 floats at a time.
typedef float F8 __attribute__((vector_size(32)));
typedef double D4 __attribute__((vector_size(32)));

float row_max(const float* x, int64_t c) {
  F8 m8;
  for (int l = 0; l < kLanes; ++l) m8[l] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= c; j += kLanes) {
    F8 v;
    std::memcpy(&v, x + j, sizeof v);
    m8 = v > m8 ? v : m8;
  }
  float m = m8[0];
  for (int l = 1; l < kLanes; ++l) m = max_of(m, m8[l]);
  for (; j < c; ++j) m = max_of(m, x[j]);
  return m;
}
double row_max(const double* x, int64_t c) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < c; ++j) m = max_of(m, x[j]);
  return m;
}

// Sum in double of c values: 8 lanes (element j in lane j % 8), then the lanes pairwise, then the tail.
double lane_sum(const float* e, int64_t c) {
  D4 lo = {0, 0, 0, 0}, hi = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + kLanes <= c; j += kLanes) {
    F8 v;
    std::memcpy(&v, e + j, sizeof v);
    lo += __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), D4);
    hi += __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), D4);
  }
  double s = ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
  for (; j < c; ++j) s += double(e[j]);
  return s;
}
double lane_sum(const double* e, int64_t c) {
  double s = 0;
  for (int64_t j = 0; j < c; ++j) s += e[j];
  return s;
}

// logsumexp of a contiguous row of c logits, accumulated in double; buf holds c exps.
template <class T>
double row_lse(const T* x, int64_t c, T* buf) {
  const T m = row_max(x, c);
  for (int64_t j = 0; j < c; ++j) buf[j] = exp_of<T>(x[j] - m);  // a plain map: vectorized
  return double(m) + std::log(lane_sum(buf, c));
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
      std::vector<T> buf(static_cast<size_t>(s.c));
      for (int64_t n = b; n < e; ++n) {
        const T* row = px + n * s.c;
        double v = row_lse(row, s.c, buf.data());
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
  if (s.reduction == kNone) {
    for (int64_t q = 0; q < rows; ++q) po[q] = T(row_loss[size_t(q)]);
    return;
  }
  double total = 0;
  for (int64_t q = 0; q < rows; ++q) total += row_loss[size_t(q)];
  // 0/0 = NaN when every target is ignored, as torch.
  po[0] = s.reduction == kMean ? T(total / double(s.used)) : T(total);
}

template <class T>
void backward_t(const Tensor& grad, const Tensor& x, const Tensor& targets, const Tensor& lse, const XentShape& s,
                Tensor& out) {
  const T* pg = grad.impl()->data_as<T>();
  const T* px = x.impl()->data_as<T>();
  const T* pl = lse.impl()->data_as<T>();
  const int64_t* pt = targets.impl()->data_as<int64_t>();
  T* po = out.impl()->data_as<T>();
  const T k = s.reduction == kMean ? T(1.0 / double(s.used)) : T(1);
  auto scale = [&](int64_t q) { return (s.reduction == kNone ? pg[q] : pg[0]) * k; };
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

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const XentShape& s, Tensor& loss,
                           Tensor& lse) {
  Tensor x = cpu::contiguous_raw(logits), t = cpu::contiguous_raw(targets);
  visit_floating(x.dtype(), [&](auto z) { forward_t<decltype(z)>(x, t, s, loss, lse); });
}

void cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const XentShape& s, Tensor& out) {
  Tensor g = cpu::contiguous_raw(grad), x = cpu::contiguous_raw(logits), t = cpu::contiguous_raw(targets),
         l = cpu::contiguous_raw(lse);
  visit_floating(x.dtype(), [&](auto z) { backward_t<decltype(z)>(g, x, t, l, s, out); });
}

}  // namespace terra::kernels
