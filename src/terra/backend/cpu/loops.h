// Strided, broadcasting element loops shared by elementwise kernels, copies and reductions.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "terra/backend/cpu/parallel.h"
#include "terra/core/tensor.h"

namespace terra::cpu {

// Strides of `t` seen through broadcasting to `shape` (0 where t has size 1 or lacks the dim).
Shape broadcast_strides(const TensorImpl& t, const Shape& shape);

// Calls f(off) for flat indices [b, e) of `shape`, where off[k] is operand k's element offset.
template <size_t N, class F>
void strided_range(const Shape& shape, const std::array<const int64_t*, N>& st, int64_t b, int64_t e, F&& f) {
  int64_t rank = int64_t(shape.size());
  if (rank == 0) {
    std::array<int64_t, N> off{};
    if (b < e) f(off);
    return;
  }
  std::vector<int64_t> idx(size_t(rank), 0);
  std::array<int64_t, N> off{};
  int64_t rem = b;
  for (int64_t d = rank - 1; d >= 0; --d) {
    idx[size_t(d)] = rem % shape[size_t(d)];
    rem /= shape[size_t(d)];
    for (size_t k = 0; k < N; ++k) off[k] += idx[size_t(d)] * st[k][d];
  }
  const int64_t inner = shape[size_t(rank - 1)];
  int64_t i = b;
  while (i < e) {
    int64_t run = std::min(inner - idx[size_t(rank - 1)], e - i);
    std::array<int64_t, N> o = off;
    for (int64_t r = 0; r < run; ++r) {
      f(o);
      for (size_t k = 0; k < N; ++k) o[k] += st[k][rank - 1];
    }
    i += run;
    // advance the multi-index by `run` positions (the inner dim wraps at most once)
    for (size_t k = 0; k < N; ++k) off[k] += run * st[k][rank - 1];
    idx[size_t(rank - 1)] += run;
    for (int64_t d = rank - 1; d > 0 && idx[size_t(d)] == shape[size_t(d)]; --d) {
      for (size_t k = 0; k < N; ++k) off[k] += st[k][d - 1] - shape[size_t(d)] * st[k][d];
      idx[size_t(d)] = 0;
      idx[size_t(d - 1)]++;
    }
  }
}

// Calls f(v, pos) for t's elements in row-major order (pos: flat position) until f returns true.
// Serial and reads t's own elements once: value checks run it before any parallel work.
template <class T, class F>
void scan_values(TensorImpl& t, F&& f) {
  const T* p = t.data_as<T>();
  if (t.is_contiguous()) {
    for (int64_t i = 0; i < t.numel; ++i)
      if (f(p[i], i)) return;
    return;
  }
  int64_t pos = 0;
  bool stop = false;
  std::array<const int64_t*, 1> st{t.strides.data()};
  strided_range<1>(t.shape, st, 0, t.numel, [&](const std::array<int64_t, 1>& o) {
    if (!stop) stop = f(p[o[0]], pos);
    ++pos;
  });
}

inline bool dense(const TensorImpl& t, int64_t n) { return t.numel == n && t.is_contiguous(); }

// out = f(a) elementwise; out may be strided (in-place ops), a broadcasts to out.
template <class TA, class TO, class F>
void unary_loop(TensorImpl& a, TensorImpl& out, F f) {
  const TA* pa = a.data_as<TA>();
  TO* po = out.data_as<TO>();
  int64_t n = out.numel;
  if (dense(a, n) && out.is_contiguous()) {
    parallel_for(n, finer_grain(kGrain), [&](int64_t b, int64_t e) {
      // The loop's own copies of the pointers and of f: read through the closure (captured by
      // reference), they are reloaded after every store when f holds a scalar of the output's
      // type (a masked_fill value, a slope), which may alias it, and the loop stays scalar.
      const TA* a_ = pa;
      TO* o_ = po;
      const F g = f;
      for (int64_t i = b; i < e; ++i) o_[i] = g(a_[i]);
    });
    return;
  }
  Shape sa = broadcast_strides(a, out.shape);
  std::array<const int64_t*, 2> st{out.strides.data(), sa.data()};
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
    strided_range<2>(out.shape, st, b, e, [&](const std::array<int64_t, 2>& o) { po[o[0]] = f(pa[o[1]]); });
  });
}

// out = f(a, b) elementwise with broadcasting; out may be strided.
template <class TA, class TB, class TO, class F>
void binary_loop(TensorImpl& a, TensorImpl& b, TensorImpl& out, F f) {
  const TA* pa = a.data_as<TA>();
  const TB* pb = b.data_as<TB>();
  TO* po = out.data_as<TO>();
  int64_t n = out.numel;
  if (out.is_contiguous()) {
    if (dense(a, n) && dense(b, n)) {
      parallel_for(n, finer_grain(kGrain), [&](int64_t s, int64_t e) {
        const TA* a_ = pa;  // the loop's own copies (see unary_loop)
        const TB* b_ = pb;
        TO* o_ = po;
        const F g = f;
        for (int64_t i = s; i < e; ++i) o_[i] = g(a_[i], b_[i]);
      });
      return;
    }
    if (dense(a, n) && b.numel == 1) {
      const TB v = pb[0];
      parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
        const TA* a_ = pa;  // the loop's own copies (see unary_loop)
        TO* o_ = po;
        const F g = f;
        const TB w = v;
        for (int64_t i = s; i < e; ++i) o_[i] = g(a_[i], w);
      });
      return;
    }
    if (a.numel == 1 && dense(b, n)) {
      const TA v = pa[0];
      parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
        const TB* b_ = pb;  // the loop's own copies (see unary_loop)
        TO* o_ = po;
        const F g = f;
        const TA w = v;
        for (int64_t i = s; i < e; ++i) o_[i] = g(w, b_[i]);
      });
      return;
    }
  }
  Shape sa = broadcast_strides(a, out.shape), sb = broadcast_strides(b, out.shape);
  const size_t r = out.shape.size();
  // Broadcasts along whole rows (a bias [N] over [M, N], a statistic [M, 1] over [M, N]): a
  // contiguous output whose operands step by 1 or 0 along the inner dim run row by row, with
  // unit-stride inner loops the compiler vectorizes.
  if (r >= 2 && out.is_contiguous() && (sa[r - 1] == 0 || sa[r - 1] == 1) && (sb[r - 1] == 0 || sb[r - 1] == 1)) {
    const int64_t inner = out.shape[r - 1], rows = inner ? n / inner : 0;
    const bool ua = sa[r - 1] == 1, ub = sb[r - 1] == 1;
    parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)), [&](int64_t s, int64_t e) {
      const F g = f;  // the loops' own copy (see unary_loop)
      for (int64_t row = s; row < e; ++row) {
        int64_t oa = 0, ob = 0, rem = row;
        for (size_t d = r - 1; d-- > 0;) {
          int64_t i = rem % out.shape[d];
          rem /= out.shape[d];
          oa += i * sa[d];
          ob += i * sb[d];
        }
        const TA* ra = pa + oa;
        const TB* rb = pb + ob;
        TO* ro = po + row * inner;
        if (ua && ub) {
          for (int64_t i = 0; i < inner; ++i) ro[i] = g(ra[i], rb[i]);
        } else if (ua) {
          const TB v = rb[0];
          for (int64_t i = 0; i < inner; ++i) ro[i] = g(ra[i], v);
        } else if (ub) {
          const TA v = ra[0];
          for (int64_t i = 0; i < inner; ++i) ro[i] = g(v, rb[i]);
        } else {
          const TO v = g(ra[0], rb[0]);
          for (int64_t i = 0; i < inner; ++i) ro[i] = v;
        }
      }
    });
    return;
  }
  std::array<const int64_t*, 3> st{out.strides.data(), sa.data(), sb.data()};
  parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
    strided_range<3>(out.shape, st, s, e,
                     [&](const std::array<int64_t, 3>& o) { po[o[0]] = f(pa[o[1]], pb[o[2]]); });
  });
}

// out = f(a, b, c) elementwise with broadcasting (where, clamp with tensors, ...).
template <class TA, class TB, class TC, class TO, class F>
void ternary_loop(TensorImpl& a, TensorImpl& b, TensorImpl& c, TensorImpl& out, F f) {
  const TA* pa = a.data_as<TA>();
  const TB* pb = b.data_as<TB>();
  const TC* pc = c.data_as<TC>();
  TO* po = out.data_as<TO>();
  Shape sa = broadcast_strides(a, out.shape), sb = broadcast_strides(b, out.shape),
        sc = broadcast_strides(c, out.shape);
  std::array<const int64_t*, 4> st{out.strides.data(), sa.data(), sb.data(), sc.data()};
  parallel_for(out.numel, kGrain, [&](int64_t s, int64_t e) {
    strided_range<4>(out.shape, st, s, e, [&](const std::array<int64_t, 4>& o) {
      po[o[0]] = f(pa[o[1]], pb[o[2]], pc[o[3]]);
    });
  });
}

// dst = cast(src) with broadcasting; both may be strided.
void copy_into(TensorImpl& src, TensorImpl& dst);
// Every element of a contiguous kernel output set to 0 (outputs the kernel then scatters into).
void zero_fill(TensorImpl& t);
// A contiguous tensor with src's values (src itself when already contiguous). No dispatch.
Tensor contiguous_raw(const Tensor& src);

// For each output row, calls f(row, R, out_index) where `row` holds the R reduced elements
// contiguously. `dims` are the reduced dims (sorted, unique). Parallel over rows.
template <class T, class F>
void reduce_rows(const Tensor& in, const std::vector<int64_t>& dims, F&& f);

}  // namespace terra::cpu

#include "terra/backend/cpu/reduce_rows.inl"
