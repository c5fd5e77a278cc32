// Pooling and nearest upsampling. Average pooling in float32 runs on oneDNN; the rest are
// per-plane loops (memory-bound, parallel over N*C planes, so scatters never race).
#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "terra/backend/cpu/dnnl_common.h"
#include "terra/backend/cpu/loops.h"
#include "terra/backend/pool_kernels.h"
#include "terra/core/threads.h"

namespace terra::kernels {
namespace {

struct Win {
  int64_t NC, H, W, OH, OW, kh, kw, sh, sw, ph, pw;
};

Win window(const Shape& x, const Shape& y, const Attrs& a) {
  const auto &k = a.ints("kernel"), &s = a.ints("stride"), &p = a.ints("padding");
  return Win{x[0] * x[1], x[2], x[3], y[2], y[3], k[0], k[1], s[0], s[1], p[0], p[1]};
}

template <class F>
void by_dtype(DType d, const char* op, F&& f) {
  if (d == DType::Float32) return f(float{});
  if (d == DType::Float64) return f(double{});
  throw std::invalid_argument(std::string("[") + op + "] only float32 and float64 are supported");
}

template <class F>
void planes(int64_t nc, int64_t plane, F&& f) {
  cpu::parallel_for(nc, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(plane, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

// Divisor of an average window: torch counts padding (not the area past it) when asked to.
inline int64_t avg_divisor(const Win& w, int64_t h0, int64_t w0, bool include_pad) {
  int64_t h1 = std::min(h0 + w.kh, w.H + w.ph), w1 = std::min(w0 + w.kw, w.W + w.pw);
  if (include_pad) return (h1 - h0) * (w1 - w0);
  return (std::min(h1, w.H) - std::max<int64_t>(h0, 0)) * (std::min(w1, w.W) - std::max<int64_t>(w0, 0));
}

namespace dn = cpu::onednn;

dn::Key pool_key(int64_t tag, const Win& w, const Shape& x, bool inc) {
  return {tag, x[0], x[1], w.H, w.W, w.OH, w.OW, w.kh, w.kw, w.sh, w.sw, w.ph, w.pw, inc};
}

dnnl::pooling_forward::primitive_desc avg_fwd_pd(const Win& w, const Shape& x, bool inc) {
  auto src = dn::plain_f32({x[0], x[1], w.H, w.W}), dst = dn::plain_f32({x[0], x[1], w.OH, w.OW});
  dnnl::memory::dims padr{(w.OH - 1) * w.sh + w.kh - w.H - w.ph, (w.OW - 1) * w.sw + w.kw - w.W - w.pw};
  dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_training,
                                inc ? dnnl::algorithm::pooling_avg_include_padding
                                    : dnnl::algorithm::pooling_avg_exclude_padding,
                                src, dst, {w.sh, w.sw}, {w.kh, w.kw}, {w.ph, w.pw}, padr);
  return dnnl::pooling_forward::primitive_desc(d, dn::user_scratchpad_attr(), dn::engine());
}

void avg_fwd_one(const Win& w, const Shape& x, bool inc, const float* px, float* py) {
  auto c = dn::cached(pool_key(1, w, x, inc), [&] {
    auto pd = avg_fwd_pd(w, x, inc);
    return dn::Cached{dnnl::pooling_forward(pd), pd};
  });
  const auto src = dn::plain_f32({x[0], x[1], w.H, w.W}), dst = dn::plain_f32({x[0], x[1], w.OH, w.OW});
  dn::execute(*c, {{DNNL_ARG_SRC, src, px}, {DNNL_ARG_DST, dst, py}});
}

void avg_bwd_one(const Win& w, const Shape& x, bool inc, const float* pgy, float* pgx) {
  auto c = dn::cached(pool_key(2, w, x, inc), [&] {
    auto src = dn::plain_f32({x[0], x[1], w.H, w.W}), dst = dn::plain_f32({x[0], x[1], w.OH, w.OW});
    dnnl::memory::dims padr{(w.OH - 1) * w.sh + w.kh - w.H - w.ph, (w.OW - 1) * w.sw + w.kw - w.W - w.pw};
    dnnl::pooling_backward::desc d(inc ? dnnl::algorithm::pooling_avg_include_padding
                                       : dnnl::algorithm::pooling_avg_exclude_padding,
                                   src, dst, {w.sh, w.sw}, {w.kh, w.kw}, {w.ph, w.pw}, padr);
    dnnl::pooling_backward::primitive_desc pd(d, dn::user_scratchpad_attr(), dn::engine(), avg_fwd_pd(w, x, inc));
    return dn::Cached{dnnl::pooling_backward(pd), pd};
  });
  const auto src = dn::plain_f32({x[0], x[1], w.H, w.W}), dst = dn::plain_f32({x[0], x[1], w.OH, w.OW});
  dn::execute(*c, {{DNNL_ARG_DIFF_DST, dst, pgy}, {DNNL_ARG_DIFF_SRC, src, pgx}});
}

// Runs f(sub_shape, n0) over batch slices of ceil(N / threads) images, one single-threaded oneDNN
// call each; the slices depend only on the shape and num_threads() (same bits in every mode).
template <class F>
void over_batch(const Win& w, const Shape& x, F&& f) {
  const int threads = num_threads();
  const int64_t work = x[0] * x[1] * (w.H * w.W + w.OH * w.OW * w.kh * w.kw);
  if (threads <= 1 || x[0] < 2 || work < cpu::kGrain * 4) return f(x, int64_t(0));
  const int64_t bs = (x[0] + threads - 1) / threads, parts = (x[0] + bs - 1) / bs;
  cpu::parallel_for(parts, 1, [&](int64_t s, int64_t e) {
    for (int64_t p = s; p < e; ++p) {
      Shape sub = x;
      sub[0] = std::min(x[0], (p + 1) * bs) - p * bs;
      f(sub, p * bs);
    }
  });
}

void avg_fwd_dnnl(const Win& w, const Shape& x, bool inc, const float* px, float* py) {
  over_batch(w, x, [&](const Shape& sub, int64_t n0) {
    avg_fwd_one(w, sub, inc, px + n0 * x[1] * w.H * w.W, py + n0 * x[1] * w.OH * w.OW);
  });
}

void avg_bwd_dnnl(const Win& w, const Shape& x, bool inc, const float* pgy, float* pgx) {
  over_batch(w, x, [&](const Shape& sub, int64_t n0) {
    avg_bwd_one(w, sub, inc, pgy + n0 * x[1] * w.OH * w.OW, pgx + n0 * x[1] * w.H * w.W);
  });
}

// Adaptive pooling bins, as torch: [floor(i*in/out), ceil((i+1)*in/out)).
inline int64_t bin_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
inline int64_t bin_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }
// Nearest source index, as torch: floor(dst * in/out) computed in float, clamped.
inline int64_t nearest_src(int64_t d, int64_t in, int64_t out) {
  float scale = float(in) / float(out);
  return std::min(int64_t(std::floor(float(d) * scale)), in - 1);
}

}  // namespace

void max_pool2d(const KernelArgs& k) {
  Tensor x = cpu::contiguous_raw(k.in[0]);
  Win w = window(x.shape(), k.out[0].shape(), k.attrs);
  int64_t* pi = k.out[1].impl()->data_as<int64_t>();
  by_dtype(x.dtype(), "max_pool2d", [&](auto z) {
    using T = decltype(z);
    const T* px = x.impl()->data_as<T>();
    T* py = k.out[0].impl()->data_as<T>();
    planes(w.NC, w.H * w.W, [&](int64_t p) {
      const T* xp = px + p * w.H * w.W;
      for (int64_t oh = 0; oh < w.OH; ++oh)
        for (int64_t ow = 0; ow < w.OW; ++ow) {
          int64_t h0 = oh * w.sh - w.ph, w0 = ow * w.sw - w.pw;
          T best = -std::numeric_limits<T>::infinity();
          int64_t arg = std::max<int64_t>(h0, 0) * w.W + std::max<int64_t>(w0, 0);
          const int64_t wb = std::max<int64_t>(w0, 0), we = std::min(w0 + w.kw, w.W);
          for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + w.kh, w.H); ++ih)
            for (int64_t iw = wb; iw < we; ++iw) {
              // Branch-free select (random data mispredicts a branch half the time); a NaN wins
              // and then stays, as torch propagates it.
              T v = xp[ih * w.W + iw];
              bool take = (v > best) | ((v != v) & (best == best));
              best = take ? v : best;
              arg = take ? ih * w.W + iw : arg;
            }
          int64_t o = (p * w.OH + oh) * w.OW + ow;
          py[o] = best;
          pi[o] = arg;
        }
    });
  });
}

void max_pool2d_backward_values(std::span<const Tensor> in, const Attrs& a) {
  const Shape& xs = a.ints("input_shape");
  int64_t hw = xs[2] * xs[3], bad = 0, pos = -1;
  cpu::scan_values<int64_t>(*in[1].impl(), [&](int64_t v, int64_t i) {
    if (v >= 0 && v < hw) return false;
    bad = v;
    pos = i;
    return true;
  });
  if (pos >= 0)
    throw std::invalid_argument("[max_pool2d_backward] index " + std::to_string(bad) + " at position " +
                                std::to_string(pos) + " is out of range for an input plane of " +
                                std::to_string(xs[2]) + "x" + std::to_string(xs[3]) + " elements");
}

void max_pool2d_backward(const KernelArgs& k) {
  max_pool2d_backward_values(k.in, k.attrs);  // before the parallel scatter, which must not throw
  Tensor gy = cpu::contiguous_raw(k.in[0]), idx = cpu::contiguous_raw(k.in[1]);
  Tensor& gx = k.out[0];
  const Shape &xs = gx.shape(), &ys = gy.shape();
  int64_t NC = xs[0] * xs[1], HW = xs[2] * xs[3], OHW = ys[2] * ys[3];
  const int64_t* pi = idx.impl()->data_as<int64_t>();
  by_dtype(gx.dtype(), "max_pool2d_backward", [&](auto z) {
    using T = decltype(z);
    const T* pg = gy.impl()->data_as<T>();
    T* po = gx.impl()->data_as<T>();
    planes(NC, HW, [&](int64_t p) {
      T* op = po + p * HW;
      std::fill_n(op, HW, T(0));
      for (int64_t i = 0; i < OHW; ++i) op[pi[p * OHW + i]] += pg[p * OHW + i];
    });
  });
}

void avg_pool2d(const KernelArgs& k) {
  Tensor x = cpu::contiguous_raw(k.in[0]);
  Win w = window(x.shape(), k.out[0].shape(), k.attrs);
  bool inc = k.attrs.b("count_include_pad");
  by_dtype(x.dtype(), "avg_pool2d", [&](auto z) {
    using T = decltype(z);
    const T* px = x.impl()->data_as<T>();
    T* py = k.out[0].impl()->data_as<T>();
    if (k.out[0].numel() == 0) return;
    if constexpr (std::is_same_v<T, float>) return avg_fwd_dnnl(w, x.shape(), inc, px, py);
    planes(w.NC, w.H * w.W, [&](int64_t p) {
      const T* xp = px + p * w.H * w.W;
      for (int64_t oh = 0; oh < w.OH; ++oh)
        for (int64_t ow = 0; ow < w.OW; ++ow) {
          int64_t h0 = oh * w.sh - w.ph, w0 = ow * w.sw - w.pw;
          double s = 0;
          for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + w.kh, w.H); ++ih)
            for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w0 + w.kw, w.W); ++iw) s += xp[ih * w.W + iw];
          py[(p * w.OH + oh) * w.OW + ow] = T(s / double(avg_divisor(w, h0, w0, inc)));
        }
    });
  });
}

void avg_pool2d_backward(const KernelArgs& k) {
  Tensor gy = cpu::contiguous_raw(k.in[0]);
  Tensor& gx = k.out[0];
  Win w = window(gx.shape(), gy.shape(), k.attrs);
  bool inc = k.attrs.b("count_include_pad");
  by_dtype(gx.dtype(), "avg_pool2d_backward", [&](auto z) {
    using T = decltype(z);
    const T* pg = gy.impl()->data_as<T>();
    T* po = gx.impl()->data_as<T>();
    if (gx.numel() == 0) return;
    if (gy.numel() == 0) { std::fill_n(po, gx.numel(), T(0)); return; }
    if constexpr (std::is_same_v<T, float>) return avg_bwd_dnnl(w, gx.shape(), inc, pg, po);
    planes(w.NC, w.H * w.W, [&](int64_t p) {
      T* op = po + p * w.H * w.W;
      std::fill_n(op, w.H * w.W, T(0));
      for (int64_t oh = 0; oh < w.OH; ++oh)
        for (int64_t ow = 0; ow < w.OW; ++ow) {
          int64_t h0 = oh * w.sh - w.ph, w0 = ow * w.sw - w.pw;
          T g = T(double(pg[(p * w.OH + oh) * w.OW + ow]) / double(avg_divisor(w, h0, w0, inc)));
          for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + w.kh, w.H); ++ih)
            for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w0 + w.kw, w.W); ++iw) op[ih * w.W + iw] += g;
        }
    });
  });
}

void adaptive_avg_pool2d(const KernelArgs& k) {
  Tensor x = cpu::contiguous_raw(k.in[0]);
  const Shape &xs = x.shape(), &ys = k.out[0].shape();
  int64_t H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
  by_dtype(x.dtype(), "adaptive_avg_pool2d", [&](auto z) {
    using T = decltype(z);
    const T* px = x.impl()->data_as<T>();
    T* py = k.out[0].impl()->data_as<T>();
    planes(xs[0] * xs[1], H * W, [&](int64_t p) {
      const T* xp = px + p * H * W;
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
          double s = 0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) s += xp[ih * W + iw];
          py[(p * OH + oh) * OW + ow] = T(s / double((h1 - h0) * (w1 - w0)));
        }
      }
    });
  });
}

void adaptive_avg_pool2d_backward(const KernelArgs& k) {
  Tensor gy = cpu::contiguous_raw(k.in[0]);
  Tensor& gx = k.out[0];
  const Shape &xs = gx.shape(), &ys = gy.shape();
  int64_t H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
  by_dtype(gx.dtype(), "adaptive_avg_pool2d_backward", [&](auto z) {
    using T = decltype(z);
    const T* pg = gy.impl()->data_as<T>();
    T* po = gx.impl()->data_as<T>();
    planes(xs[0] * xs[1], H * W, [&](int64_t p) {
      T* op = po + p * H * W;
      std::fill_n(op, H * W, T(0));
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
          T g = T(double(pg[(p * OH + oh) * OW + ow]) / double((h1 - h0) * (w1 - w0)));
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) op[ih * W + iw] += g;
        }
      }
    });
  });
}

void upsample_nearest2d(const KernelArgs& k) {
  Tensor x = cpu::contiguous_raw(k.in[0]);
  const Shape &xs = x.shape(), &ys = k.out[0].shape();
  int64_t H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
  std::vector<int64_t> sw(static_cast<size_t>(OW));
  for (int64_t ow = 0; ow < OW; ++ow) sw[size_t(ow)] = nearest_src(ow, W, OW);
  by_dtype(x.dtype(), "upsample_nearest2d", [&](auto z) {
    using T = decltype(z);
    const T* px = x.impl()->data_as<T>();
    T* py = k.out[0].impl()->data_as<T>();
    planes(xs[0] * xs[1], OH * OW, [&](int64_t p) {
      for (int64_t oh = 0; oh < OH; ++oh) {
        const T* row = px + (p * H + nearest_src(oh, H, OH)) * W;
        T* out = py + (p * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ++ow) out[ow] = row[sw[size_t(ow)]];
      }
    });
  });
}

void upsample_nearest2d_backward(const KernelArgs& k) {
  Tensor gy = cpu::contiguous_raw(k.in[0]);
  Tensor& gx = k.out[0];
  const Shape &xs = gx.shape(), &ys = gy.shape();
  int64_t H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
  std::vector<int64_t> sw(static_cast<size_t>(OW));
  for (int64_t ow = 0; ow < OW; ++ow) sw[size_t(ow)] = nearest_src(ow, W, OW);
  by_dtype(gx.dtype(), "upsample_nearest2d_backward", [&](auto z) {
    using T = decltype(z);
    const T* pg = gy.impl()->data_as<T>();
    T* po = gx.impl()->data_as<T>();
    planes(xs[0] * xs[1], OH * OW, [&](int64_t p) {
      T* op = po + p * H * W;
      std::fill_n(op, H * W, T(0));
      for (int64_t oh = 0; oh < OH; ++oh) {
        T* row = op + nearest_src(oh, H, OH) * W;
        const T* g = pg + (p * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ++ow) row[sw[size_t(ow)]] += g[ow];
      }
    });
  });
}

}  // namespace terra::kernels
