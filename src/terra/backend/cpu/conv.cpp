// Convolutions: oneDNN primitives for float32 (conv_dnnl.cpp), direct loops on doubles for
// float64 (gradcheck) as the reference path.
#include <stdexcept>
#include <string>

#include "terra/backend/conv_kernels.h"
#include "terra/backend/cpu/conv_dnnl.h"
#include "terra/backend/cpu/loops.h"

namespace terra::kernels {
namespace {

using conv_dnnl::Geo;

Geo geometry(const Shape& x, const Shape& w, const Shape& y, const Attrs& a) {
  const auto& s = a.ints("stride");
  const auto& p = a.ints("padding");
  const auto& d = a.ints("dilation");
  return Geo{x[0], x[1], x[2], x[3], w[0], w[2], w[3], y[2], y[3], a.i("groups"),
             s[0], s[1], p[0], p[1], d[0], d[1]};
}

// ---------------------------------------------------------------- float64 (and fallback) loops
template <class T>
void fwd_loop(const Geo& g, const T* x, const T* w, const T* b, T* y) {
  const int64_t Cg = g.C / g.G, Og = g.O / g.G;
  cpu::parallel_for(g.N * g.O, 1, [&](int64_t s, int64_t e) {
    for (int64_t no = s; no < e; ++no) {
      const int64_t n = no / g.O, o = no % g.O, grp = o / Og;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          double acc = b ? double(b[o]) : 0.0;
          for (int64_t ci = 0; ci < Cg; ++ci) {
            const T* xp = x + ((n * g.C + grp * Cg + ci) * g.H) * g.W;
            const T* wp = w + ((o * Cg + ci) * g.KH) * g.KW;
            for (int64_t kh = 0; kh < g.KH; ++kh) {
              int64_t ih = oh * g.sh - g.ph + kh * g.dh;
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                int64_t iw = ow * g.sw - g.pw + kw * g.dw;
                if (iw < 0 || iw >= g.W) continue;
                acc += double(xp[ih * g.W + iw]) * double(wp[kh * g.KW + kw]);
              }
            }
          }
          y[((n * g.O + o) * g.OH + oh) * g.OW + ow] = T(acc);
        }
    }
  });
}

// grad_x gathered per input element (no write races): the outputs whose window covers it.
template <class T>
void bwd_input_loop(const Geo& g, const T* gy, const T* w, T* gx) {
  const int64_t Cg = g.C / g.G, Og = g.O / g.G;
  cpu::parallel_for(g.N * g.C, 1, [&](int64_t s, int64_t e) {
    for (int64_t nc = s; nc < e; ++nc) {
      const int64_t n = nc / g.C, c = nc % g.C, grp = c / Cg, ci = c % Cg;
      for (int64_t ih = 0; ih < g.H; ++ih)
        for (int64_t iw = 0; iw < g.W; ++iw) {
          double acc = 0;
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            int64_t th = ih + g.ph - kh * g.dh;
            if (th < 0 || th % g.sh) continue;
            int64_t oh = th / g.sh;
            if (oh >= g.OH) continue;
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              int64_t tw = iw + g.pw - kw * g.dw;
              if (tw < 0 || tw % g.sw) continue;
              int64_t ow = tw / g.sw;
              if (ow >= g.OW) continue;
              for (int64_t oi = 0; oi < Og; ++oi) {
                int64_t o = grp * Og + oi;
                acc += double(gy[((n * g.O + o) * g.OH + oh) * g.OW + ow]) *
                       double(w[((o * Cg + ci) * g.KH + kh) * g.KW + kw]);
              }
            }
          }
          gx[((n * g.C + c) * g.H + ih) * g.W + iw] = T(acc);
        }
    }
  });
}

template <class T>
void bwd_weight_loop(const Geo& g, const T* gy, const T* x, T* gw) {
  const int64_t Cg = g.C / g.G, Og = g.O / g.G;
  cpu::parallel_for(g.O * Cg, 1, [&](int64_t s, int64_t e) {
    for (int64_t oc = s; oc < e; ++oc) {
      const int64_t o = oc / Cg, ci = oc % Cg, c = (o / Og) * Cg + ci;
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          double acc = 0;
          for (int64_t n = 0; n < g.N; ++n)
            for (int64_t oh = 0; oh < g.OH; ++oh) {
              int64_t ih = oh * g.sh - g.ph + kh * g.dh;
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t ow = 0; ow < g.OW; ++ow) {
                int64_t iw = ow * g.sw - g.pw + kw * g.dw;
                if (iw < 0 || iw >= g.W) continue;
                acc += double(gy[((n * g.O + o) * g.OH + oh) * g.OW + ow]) *
                       double(x[((n * g.C + c) * g.H + ih) * g.W + iw]);
              }
            }
          gw[((o * Cg + ci) * g.KH + kh) * g.KW + kw] = T(acc);
        }
    }
  });
}

bool empty_geo(const Geo& g) { return g.N * g.C * g.H * g.W == 0 || g.N * g.O * g.OH * g.OW == 0; }

template <class F>
void by_dtype(DType d, const char* op, F&& f) {
  if (d == DType::Float32) return f(float{});
  if (d == DType::Float64) return f(double{});
  throw std::invalid_argument(std::string("[") + op + "] only float32 and float64 are supported");
}

template <class T>
const T* ptr(const Tensor& t) {
  return t.impl()->data_as<T>();
}

// Adds b[c] to every element of channel c of y [N, C, H, W].
template <class T>
void add_bias(T* y, const T* b, int64_t N, int64_t C, int64_t HW) {
  cpu::parallel_for(N * C, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(HW, 1)), [&](int64_t s, int64_t e) {
    for (int64_t nc = s; nc < e; ++nc) {
      T v = b[nc % C];
      T* p = y + nc * HW;
      for (int64_t i = 0; i < HW; ++i) p[i] += v;
    }
  });
}

}  // namespace

void conv2d(const KernelArgs& k) {
  Tensor x = cpu::contiguous_raw(k.in[0]), w = cpu::contiguous_raw(k.in[1]);
  Tensor b = k.in.size() > 2 ? cpu::contiguous_raw(k.in[2]) : Tensor();
  Tensor& y = k.out[0];
  Geo g = geometry(x.shape(), w.shape(), y.shape(), k.attrs);
  by_dtype(y.dtype(), "conv2d", [&](auto z) {
    using T = decltype(z);
    T* py = y.impl()->data_as<T>();
    if (empty_geo(g)) {
      std::fill_n(py, y.numel(), T(0));
      if (b.defined() && y.numel()) add_bias(py, ptr<T>(b), g.N, g.O, g.OH * g.OW);
      return;
    }
    const T* pb = b.defined() ? ptr<T>(b) : nullptr;
    if constexpr (std::is_same_v<T, float>) conv_dnnl::forward(g, ptr<T>(x), ptr<T>(w), pb, py);
    else fwd_loop<T>(g, ptr<T>(x), ptr<T>(w), pb, py);
  });
}

void conv2d_backward_input(const KernelArgs& k) {
  Tensor gy = cpu::contiguous_raw(k.in[0]), w = cpu::contiguous_raw(k.in[1]);
  Tensor& gx = k.out[0];
  Geo g = geometry(gx.shape(), w.shape(), gy.shape(), k.attrs);
  by_dtype(gx.dtype(), "conv2d_backward_input", [&](auto z) {
    using T = decltype(z);
    T* pgx = gx.impl()->data_as<T>();
    if (empty_geo(g) || g.KH * g.KW == 0) { std::fill_n(pgx, gx.numel(), T(0)); return; }
    if constexpr (std::is_same_v<T, float>) conv_dnnl::backward_data(g, ptr<T>(gy), ptr<T>(w), pgx);
    else bwd_input_loop<T>(g, ptr<T>(gy), ptr<T>(w), pgx);
  });
}

void conv2d_backward_weight(const KernelArgs& k) {
  Tensor gy = cpu::contiguous_raw(k.in[0]), x = cpu::contiguous_raw(k.in[1]);
  Tensor& gw = k.out[0];
  Geo g = geometry(x.shape(), gw.shape(), gy.shape(), k.attrs);
  by_dtype(gw.dtype(), "conv2d_backward_weight", [&](auto z) {
    using T = decltype(z);
    T* pgw = gw.impl()->data_as<T>();
    if (empty_geo(g) || gw.numel() == 0) { std::fill_n(pgw, gw.numel(), T(0)); return; }
    if constexpr (std::is_same_v<T, float>) conv_dnnl::backward_weights(g, ptr<T>(gy), ptr<T>(x), pgw);
    else bwd_weight_loop<T>(g, ptr<T>(gy), ptr<T>(x), pgw);
  });
}

void conv_transpose2d(const KernelArgs& k) {
  // The transposed conv of x is the input-gradient of the conv whose output has x's shape.
  Tensor x = cpu::contiguous_raw(k.in[0]), w = cpu::contiguous_raw(k.in[1]);
  Tensor b = k.in.size() > 2 ? cpu::contiguous_raw(k.in[2]) : Tensor();
  Tensor& y = k.out[0];
  Geo g = geometry(y.shape(), w.shape(), x.shape(), k.attrs);
  by_dtype(y.dtype(), "conv_transpose2d", [&](auto z) {
    using T = decltype(z);
    T* py = y.impl()->data_as<T>();
    if (empty_geo(g) || g.KH * g.KW == 0) std::fill_n(py, y.numel(), T(0));
    else if constexpr (std::is_same_v<T, float>) conv_dnnl::backward_data(g, ptr<T>(x), ptr<T>(w), py);
    else bwd_input_loop<T>(g, ptr<T>(x), ptr<T>(w), py);
    if (b.defined() && y.numel()) add_bias(py, ptr<T>(b), g.N, g.C, g.H * g.W);
  });
}

}  // namespace terra::kernels
