// Batch and layer normalization: per-channel / per-row loops with double accumulation (two
// passes, memory-bound), parallel over channels or rows so no reduction races.
#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/norm_kernels.h"

namespace terra::kernels {
namespace {

template <class F>
void by_dtype(DType d, const char* op, F&& f) {
  if (d == DType::Float32) return f(float{});
  if (d == DType::Float64) return f(double{});
  throw std::invalid_argument(std::string("[") + op + "] only float32 and float64 are supported");
}

template <class T>
const T* opt_ptr(const KernelArgs& k, bool present, size_t idx, Tensor& keep) {
  if (!present) return nullptr;
  keep = cpu::contiguous_raw(k.in[idx]);
  return keep.impl()->data_as<T>();
}

// Sums with several independent accumulators (omp simd may reassociate), so the loop vectorizes.
template <class T>
double plane_sum(const T* p, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += double(p[i]);
  return s;
}
template <class T>
double plane_sqdev(const T* p, int64_t n, double mean) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += (double(p[i]) - mean) * (double(p[i]) - mean);
  return s;
}

template <class T>
const T* cptr(const Tensor& t) {
  return t.impl()->data_as<T>();
}

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(work_per_item, 1));
}

}  // namespace

void batch_norm(const KernelArgs& k) {
  Tensor x = cpu::contiguous_raw(k.in[0]);
  const Shape& s = x.shape();
  const int64_t N = s[0], C = s[1], HW = numel_of(s) / std::max<int64_t>(N * C, 1), M = N * HW;
  const bool hw = k.attrs.b("has_weight"), hb = k.attrs.b("has_bias"), run = k.attrs.b("use_running");
  const double eps = k.attrs.f("eps");
  by_dtype(x.dtype(), "batch_norm", [&](auto z) {
    using T = decltype(z);
    Tensor kw, kb, km, kv;
    const T* w = opt_ptr<T>(k, hw, 1, kw);
    const T* b = opt_ptr<T>(k, hb, 1 + hw, kb);
    const T* rm = opt_ptr<T>(k, run, 1 + hw + hb, km);
    const T* rv = opt_ptr<T>(k, run, 2 + hw + hb, kv);
    const T* px = cptr<T>(x);
    T* py = k.out[0].impl()->data_as<T>();
    T* pm = k.out[1].impl()->data_as<T>();
    T* pi = k.out[2].impl()->data_as<T>();
    cpu::parallel_for(C, grain_for(M), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double mean, invstd;
        if (run) {
          mean = double(rm[c]);
          invstd = 1.0 / std::sqrt(double(rv[c]) + eps);
        } else {
          double sum = 0;
          for (int64_t n = 0; n < N; ++n) sum += plane_sum(px + (n * C + c) * HW, HW);
          mean = M ? sum / double(M) : 0.0;
          double sq = 0;
          for (int64_t n = 0; n < N; ++n) sq += plane_sqdev(px + (n * C + c) * HW, HW, mean);
          invstd = 1.0 / std::sqrt((M ? sq / double(M) : 0.0) + eps);
        }
        pm[c] = T(mean);
        pi[c] = T(invstd);
        double scale = invstd * (w ? double(w[c]) : 1.0), shift = (b ? double(b[c]) : 0.0) - mean * scale;
        for (int64_t n = 0; n < N; ++n) {
          const T* p = px + (n * C + c) * HW;
          T* q = py + (n * C + c) * HW;
          for (int64_t i = 0; i < HW; ++i) q[i] = T(double(p[i]) * scale + shift);
        }
      }
    });
  });
}

void batch_norm_backward(const KernelArgs& k) {
  Tensor gy = cpu::contiguous_raw(k.in[0]), x = cpu::contiguous_raw(k.in[1]);
  Tensor mean = cpu::contiguous_raw(k.in[2]), inv = cpu::contiguous_raw(k.in[3]);
  const Shape& s = x.shape();
  const int64_t N = s[0], C = s[1], HW = numel_of(s) / std::max<int64_t>(N * C, 1), M = N * HW;
  const bool hw = k.attrs.b("has_weight"), run = k.attrs.b("use_running");
  by_dtype(x.dtype(), "batch_norm_backward", [&](auto z) {
    using T = decltype(z);
    Tensor kw;
    const T* w = opt_ptr<T>(k, hw, 4, kw);
    const T *pg = cptr<T>(gy), *px = cptr<T>(x), *pm = cptr<T>(mean), *pi = cptr<T>(inv);
    T* gx = k.out[0].impl()->data_as<T>();
    T* gw = k.out[1].impl()->data_as<T>();
    T* gb = k.out[2].impl()->data_as<T>();
    cpu::parallel_for(C, grain_for(M), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const double m = double(pm[c]), is = double(pi[c]), wc = w ? double(w[c]) : 1.0;
        double sg = 0, sgx = 0;  // sum(gy), sum(gy * xhat)
        for (int64_t n = 0; n < N; ++n) {
          const T *g = pg + (n * C + c) * HW, *p = px + (n * C + c) * HW;
#pragma omp simd reduction(+ : sg, sgx)
          for (int64_t i = 0; i < HW; ++i) {
            sg += double(g[i]);
            sgx += double(g[i]) * (double(p[i]) - m) * is;
          }
        }
        gb[c] = T(sg);
        gw[c] = T(sgx);
        const double a = wc * is;
        const double mg = run || !M ? 0.0 : sg / double(M), mgx = run || !M ? 0.0 : sgx / double(M);
        for (int64_t n = 0; n < N; ++n) {
          const T *g = pg + (n * C + c) * HW, *p = px + (n * C + c) * HW;
          T* q = gx + (n * C + c) * HW;
          for (int64_t i = 0; i < HW; ++i) q[i] = T(a * (double(g[i]) - mg - (double(p[i]) - m) * is * mgx));
        }
      }
    });
  });
}

void layer_norm(const KernelArgs& k) {
  Tensor x = cpu::contiguous_raw(k.in[0]);
  const int64_t R = k.out[1].numel(), D = R ? x.numel() / R : 0;
  const bool hw = k.attrs.b("has_weight"), hb = k.attrs.b("has_bias");
  const double eps = k.attrs.f("eps");
  by_dtype(x.dtype(), "layer_norm", [&](auto z) {
    using T = decltype(z);
    Tensor kw, kb;
    const T* w = opt_ptr<T>(k, hw, 1, kw);
    const T* b = opt_ptr<T>(k, hb, 1 + hw, kb);
    const T* px = cptr<T>(x);
    T* py = k.out[0].impl()->data_as<T>();
    T* pm = k.out[1].impl()->data_as<T>();
    T* pi = k.out[2].impl()->data_as<T>();
    cpu::parallel_for(R, cpu::finer_grain(grain_for(D)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* p = px + r * D;
        double sum = 0, sq = 0;
        sum = plane_sum(p, D);
        const double mean = D ? sum / double(D) : 0.0;
        sq = plane_sqdev(p, D, mean);
        const double is = 1.0 / std::sqrt((D ? sq / double(D) : 0.0) + eps);
        pm[r] = T(mean);
        pi[r] = T(is);
        T* q = py + r * D;
        for (int64_t i = 0; i < D; ++i) {
          double v = (double(p[i]) - mean) * is;
          if (w) v *= double(w[i]);
          if (b) v += double(b[i]);
          q[i] = T(v);
        }
      }
    });
  });
}

void layer_norm_backward(const KernelArgs& k) {
  Tensor gy = cpu::contiguous_raw(k.in[0]), x = cpu::contiguous_raw(k.in[1]);
  Tensor mean = cpu::contiguous_raw(k.in[2]), inv = cpu::contiguous_raw(k.in[3]);
  const int64_t R = mean.numel(), D = R ? x.numel() / R : k.out[1].numel();
  const bool hw = k.attrs.b("has_weight");
  by_dtype(x.dtype(), "layer_norm_backward", [&](auto z) {
    using T = decltype(z);
    Tensor kw;
    const T* w = opt_ptr<T>(k, hw, 4, kw);
    const T *pg = cptr<T>(gy), *px = cptr<T>(x), *pm = cptr<T>(mean), *pi = cptr<T>(inv);
    T* gx = k.out[0].impl()->data_as<T>();
    T* gw = k.out[1].impl()->data_as<T>();
    T* gb = k.out[2].impl()->data_as<T>();
    cpu::parallel_for(R, cpu::finer_grain(grain_for(D)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T *g = pg + r * D, *p = px + r * D;
        const double m = double(pm[r]), is = double(pi[r]);
        T* q = gx + r * D;
        // The weight as a functor (1.0 without one: exact), the loops instantiated per case. With
        // `w ? w[i] : 1` inside the loop, g++ 12 left the float reduction scalar (14 instructions
        // an element; callgrind of the Python loop's runner).
        auto row = [&](auto wt) {
          double s1 = 0, s2 = 0;  // sum(dxhat), sum(dxhat * xhat)
#pragma omp simd reduction(+ : s1, s2)
          for (int64_t i = 0; i < D; ++i) {
            const double dxh = double(g[i]) * wt(i);
            s1 += dxh;
            s2 += dxh * (double(p[i]) - m) * is;
          }
          s1 /= double(D);
          s2 /= double(D);
          for (int64_t i = 0; i < D; ++i) q[i] = T(is * (double(g[i]) * wt(i) - s1 - (double(p[i]) - m) * is * s2));
        };
        if (w) row([w](int64_t i) { return double(w[i]); });
        else row([](int64_t) { return 1.0; });
      }
    });
    // Parameter gradients reduce over rows: split the normalized dims across threads instead.
    cpu::parallel_for(D, grain_for(R), [&](int64_t d0, int64_t d1) {
      std::vector<double> aw(size_t(d1 - d0), 0.0), ab(size_t(d1 - d0), 0.0);
      for (int64_t r = 0; r < R; ++r) {
        const T *g = pg + r * D, *p = px + r * D;
        const double m = double(pm[r]), is = double(pi[r]);
        for (int64_t i = d0; i < d1; ++i) {
          ab[size_t(i - d0)] += double(g[i]);
          aw[size_t(i - d0)] += double(g[i]) * (double(p[i]) - m) * is;
        }
      }
      for (int64_t i = d0; i < d1; ++i) {
        gw[i] = T(aw[size_t(i - d0)]);
        gb[i] = T(ab[size_t(i - d0)]);
      }
    });
  });
}

}  // namespace terra::kernels
