// Op-table rows for the neural-network ops: linear, conv2d, conv_transpose2d, pooling, upsampling,
// batch_norm, layer_norm. References are naive loops on doubles; float32 rows compare the oneDNN
// path against the same references.
#include <algorithm>
#include <cmath>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;

V to_f32(V v) {
  for (auto& e : v) e = double(float(e));
  return v;
}

struct ConvGeo {
  int64_t N, C, H, W, O, KH, KW;
  Int2 s{1, 1}, p{0, 0}, d{1, 1};
  int64_t G = 1;
  int64_t OH() const { return (H + 2 * p[0] - d[0] * (KH - 1) - 1) / s[0] + 1; }
  int64_t OW() const { return (W + 2 * p[1] - d[1] * (KW - 1) - 1) / s[1] + 1; }
  Shape x() const { return {N, C, H, W}; }
  Shape w() const { return {O, C / G, KH, KW}; }
  Shape y() const { return {N, O, OH(), OW()}; }
};

// y = conv(x, w) + b, written as the definition: every output sums its window.
V conv_ref(const ConvGeo& g, const V& x, const V& w, const V* b) {
  const int64_t Cg = g.C / g.G, Og = g.O / g.G, OH = g.OH(), OW = g.OW();
  V y(size_t(g.N * g.O * OH * OW), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = b ? (*b)[size_t(o)] : 0.0;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                int64_t ih = oh * g.s[0] - g.p[0] + kh * g.d[0], iw = ow * g.s[1] - g.p[1] + kw * g.d[1];
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                int64_t c = (o / Og) * Cg + ci;
                s += x[size_t(((n * g.C + c) * g.H + ih) * g.W + iw)] * w[size_t(((o * Cg + ci) * g.KH + kh) * g.KW + kw)];
              }
          y[size_t(((n * g.O + o) * OH + oh) * OW + ow)] = s;
        }
  return y;
}

// Gradient of sum(gy * conv(x, w)) wrt x and w, by scattering each output's window.
void conv_grads_ref(const ConvGeo& g, const V& x, const V& w, const V& gy, V* gx, V* gw) {
  const int64_t Cg = g.C / g.G, Og = g.O / g.G, OH = g.OH(), OW = g.OW();
  if (gx) gx->assign(size_t(g.N * g.C * g.H * g.W), 0.0);
  if (gw) gw->assign(size_t(g.O * Cg * g.KH * g.KW), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double go = gy[size_t(((n * g.O + o) * OH + oh) * OW + ow)];
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                int64_t ih = oh * g.s[0] - g.p[0] + kh * g.d[0], iw = ow * g.s[1] - g.p[1] + kw * g.d[1];
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                int64_t c = (o / Og) * Cg + ci;
                size_t xi = size_t(((n * g.C + c) * g.H + ih) * g.W + iw), wi = size_t(((o * Cg + ci) * g.KH + kh) * g.KW + kw);
                if (gx) (*gx)[xi] += go * w[wi];
                if (gw) (*gw)[wi] += go * x[xi];
              }
        }
}

struct TGeo {  // conv_transpose2d: x [N, Ci, H, W], w [Ci, Co/G, KH, KW]
  int64_t N, Ci, H, W, Cog, KH, KW;
  Int2 s{1, 1}, p{0, 0}, op{0, 0}, d{1, 1};
  int64_t G = 1;
  int64_t OH() const { return (H - 1) * s[0] - 2 * p[0] + d[0] * (KH - 1) + op[0] + 1; }
  int64_t OW() const { return (W - 1) * s[1] - 2 * p[1] + d[1] * (KW - 1) + op[1] + 1; }
};

// Each input element scatters weight-scaled copies of its kernel into the output.
V conv_transpose_ref(const TGeo& g, const V& x, const V& w, const V* b) {
  const int64_t Co = g.Cog * g.G, OH = g.OH(), OW = g.OW(), Cig = g.Ci / g.G;
  V y(size_t(g.N * Co * OH * OW), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t ci = 0; ci < g.Ci; ++ci)
      for (int64_t ih = 0; ih < g.H; ++ih)
        for (int64_t iw = 0; iw < g.W; ++iw) {
          double v = x[size_t(((n * g.Ci + ci) * g.H + ih) * g.W + iw)];
          for (int64_t oc = 0; oc < g.Cog; ++oc)
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                int64_t oh = ih * g.s[0] - g.p[0] + kh * g.d[0], ow = iw * g.s[1] - g.p[1] + kw * g.d[1];
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                int64_t co = (ci / Cig) * g.Cog + oc;
                y[size_t(((n * Co + co) * OH + oh) * OW + ow)] += v * w[size_t(((ci * g.Cog + oc) * g.KH + kh) * g.KW + kw)];
              }
        }
  if (b)
    for (size_t i = 0; i < y.size(); ++i) y[i] += (*b)[(i / size_t(OH * OW)) % size_t(Co)];
  return y;
}

struct PGeo {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw;
  int64_t OH() const { return (H + 2 * ph - kh) / sh + 1; }
  int64_t OW() const { return (W + 2 * pw - kw) / sw + 1; }
};

V max_pool_ref(const PGeo& g, const V& x) {
  V y;
  for (int64_t nc = 0; nc < g.N * g.C; ++nc)
    for (int64_t oh = 0; oh < g.OH(); ++oh)
      for (int64_t ow = 0; ow < g.OW(); ++ow) {
        double m = -INFINITY;
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            int64_t h = oh * g.sh - g.ph + i, w = ow * g.sw - g.pw + j;
            if (h >= 0 && h < g.H && w >= 0 && w < g.W) m = std::max(m, x[size_t((nc * g.H + h) * g.W + w)]);
          }
        y.push_back(m);
      }
  return y;
}

V avg_pool_ref(const PGeo& g, const V& x, bool include_pad) {
  V y;
  for (int64_t nc = 0; nc < g.N * g.C; ++nc)
    for (int64_t oh = 0; oh < g.OH(); ++oh)
      for (int64_t ow = 0; ow < g.OW(); ++ow) {
        double s = 0;
        int64_t cnt = 0;
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            int64_t h = oh * g.sh - g.ph + i, w = ow * g.sw - g.pw + j;
            if (h >= 0 && h < g.H && w >= 0 && w < g.W) {
              s += x[size_t((nc * g.H + h) * g.W + w)];
              ++cnt;
            }
          }
        y.push_back(s / double(include_pad ? g.kh * g.kw : cnt));
      }
  return y;
}

// Gradient of sum(gy * avg_pool(x)) wrt x.
V avg_pool_grad_ref(const PGeo& g, const V& gy, bool include_pad) {
  V gx(size_t(g.N * g.C * g.H * g.W), 0.0);
  size_t k = 0;
  for (int64_t nc = 0; nc < g.N * g.C; ++nc)
    for (int64_t oh = 0; oh < g.OH(); ++oh)
      for (int64_t ow = 0; ow < g.OW(); ++ow, ++k) {
        int64_t cnt = 0;
        for (int pass = 0; pass < 2; ++pass)
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              int64_t h = oh * g.sh - g.ph + i, w = ow * g.sw - g.pw + j;
              if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
              if (pass == 0) ++cnt;
              else gx[size_t((nc * g.H + h) * g.W + w)] += gy[k] / double(include_pad ? g.kh * g.kw : cnt);
            }
      }
  return gx;
}

V adaptive_ref(int64_t NC, int64_t H, int64_t W, int64_t OH, int64_t OW, const V& x) {
  V y;
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        int64_t h0 = int64_t(std::floor(double(i * H) / double(OH))), h1 = int64_t(std::ceil(double((i + 1) * H) / double(OH)));
        int64_t w0 = int64_t(std::floor(double(j * W) / double(OW))), w1 = int64_t(std::ceil(double((j + 1) * W) / double(OW)));
        double s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += x[size_t((nc * H + h) * W + w)];
        y.push_back(s / double((h1 - h0) * (w1 - w0)));
      }
  return y;
}

V upsample_ref(int64_t NC, int64_t H, int64_t W, int64_t OH, int64_t OW, const V& x) {
  V y;
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        int64_t h = std::min(H - 1, int64_t(std::floor(double(i) * double(H) / double(OH))));
        int64_t w = std::min(W - 1, int64_t(std::floor(double(j) * double(W) / double(OW))));
        y.push_back(x[size_t((nc * H + h) * W + w)]);
      }
  return y;
}

// Batch norm over [N, C, S] (S = spatial size); stats from the batch, or the given mean/var.
V batch_norm_ref(int64_t N, int64_t C, int64_t S, const V& x, const V* w, const V* b, const V* rm, const V* rv,
                 double eps) {
  V y(x.size());
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    if (rm) {
      mean = (*rm)[size_t(c)];
      var = (*rv)[size_t(c)];
    } else {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) mean += x[size_t((n * C + c) * S + s)];
      mean /= double(N * S);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) var += std::pow(x[size_t((n * C + c) * S + s)] - mean, 2);
      var /= double(N * S);
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        size_t i = size_t((n * C + c) * S + s);
        y[i] = (x[i] - mean) / std::sqrt(var + eps) * (w ? (*w)[size_t(c)] : 1.0) + (b ? (*b)[size_t(c)] : 0.0);
      }
  }
  return y;
}

V layer_norm_ref(int64_t R, int64_t D, const V& x, const V* w, const V* b, double eps) {
  V y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < D; ++i) mean += x[size_t(r * D + i)];
    mean /= double(D);
    for (int64_t i = 0; i < D; ++i) var += std::pow(x[size_t(r * D + i)] - mean, 2);
    var /= double(D);
    for (int64_t i = 0; i < D; ++i)
      y[size_t(r * D + i)] = (x[size_t(r * D + i)] - mean) / std::sqrt(var + eps) * (w ? (*w)[size_t(i)] : 1.0) +
                             (b ? (*b)[size_t(i)] : 0.0);
  }
  return y;
}

V linear_ref(int64_t R, int64_t I, int64_t O, const V& x, const V& w, const V* b) {
  V y;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t o = 0; o < O; ++o) {
      double s = b ? (*b)[size_t(o)] : 0.0;
      for (int64_t i = 0; i < I; ++i) s += x[size_t(r * I + i)] * w[size_t(o * I + i)];
      y.push_back(s);
    }
  return y;
}

const std::vector<std::string> kConvOps{"conv2d", "conv2d_backward_input", "conv2d_backward_weight", "sum"};

void conv_rows() {
  {
    ConvGeo g{2, 3, 5, 5, 4, 3, 3};
    g.p = {1, 1};
    add_case({.name = "conv2d/basic_bias", .ops = kConvOps,
              .inputs = {{g.x()}, {g.w()}, {{4}}},
              .fn = [](const T& x) { return conv2d(x[0], x[1], x[2], {1, 1}, {1, 1}); },
              .reference = [g](const std::vector<V>& v) { return conv_ref(g, v[0], v[1], &v[2]); }});
  }
  {
    ConvGeo g{2, 4, 7, 7, 6, 3, 3};
    g.s = {2, 1}, g.p = {1, 2}, g.d = {2, 1}, g.G = 2;
    add_case({.name = "conv2d/grouped_strided_dilated", .ops = kConvOps,
              .inputs = {{g.x()}, {g.w()}},
              .fn = [g](const T& x) { return conv2d(x[0], x[1], {}, g.s, g.p, g.d, g.G); },
              .reference = [g](const std::vector<V>& v) { return conv_ref(g, v[0], v[1], nullptr); }});
  }
  {
    // Non-contiguous input: x is read through a transposed view.
    ConvGeo g{2, 3, 4, 5, 2, 2, 3};
    g.s = {2, 2};
    add_case({.name = "conv2d/noncontiguous", .ops = kConvOps,
              .inputs = {{{2, 3, 5, 4}}, {g.w()}, {{2}}},
              .fn = [](const T& x) { return conv2d(x[0].transpose(2, 3), x[1], x[2], 2, 0); },
              .reference = [g](const std::vector<V>& v) {
                V xt;
                for (int64_t nc = 0; nc < 6; ++nc)
                  for (int64_t h = 0; h < 4; ++h)
                    for (int64_t w = 0; w < 5; ++w) xt.push_back(v[0][size_t((nc * 5 + w) * 4 + h)]);
                return conv_ref(g, xt, v[1], &v[2]); }});
  }
  // float32 through oneDNN: forward, and each backward op called directly.
  for (bool grouped : {false, true}) {
    ConvGeo g{2, 4, 9, 8, 6, 3, 3};
    g.s = {2, 2}, g.p = {1, 0}, g.d = {1, 2}, g.G = grouped ? 2 : 1;
    std::string tag = grouped ? "/grouped" : "";
    add_case({.name = "conv2d/f32" + tag, .ops = {"conv2d"},
              .inputs = {{g.x(), DType::Float32}, {g.w(), DType::Float32}, {{6}, DType::Float32}},
              .fn = [g](const T& x) { return conv2d(x[0], x[1], x[2], g.s, g.p, g.d, g.G); },
              .reference = [g](const std::vector<V>& v) {
                V b = to_f32(v[2]);
                return conv_ref(g, to_f32(v[0]), to_f32(v[1]), &b); },
              .tol = 1e-4, .gradcheck = false});
    add_case({.name = "conv2d_backward_input/f32" + tag, .ops = {"conv2d_backward_input"},
              .inputs = {{g.y(), DType::Float32}, {g.w(), DType::Float32}},
              .fn = [g](const T& x) { return conv2d_backward_input(x[0], x[1], g.x(), g.s, g.p, g.d, g.G); },
              .reference = [g](const std::vector<V>& v) {
                V gx;
                conv_grads_ref(g, V(size_t(numel_of(g.x())), 0.0), to_f32(v[1]), to_f32(v[0]), &gx, nullptr);
                return gx; },
              .tol = 1e-4, .gradcheck = false});
    add_case({.name = "conv2d_backward_weight/f32" + tag, .ops = {"conv2d_backward_weight"},
              .inputs = {{g.y(), DType::Float32}, {g.x(), DType::Float32}},
              .fn = [g](const T& x) { return conv2d_backward_weight(x[0], x[1], g.w(), g.s, g.p, g.d, g.G); },
              .reference = [g](const std::vector<V>& v) {
                V gw;
                conv_grads_ref(g, to_f32(v[1]), V(size_t(numel_of(g.w())), 0.0), to_f32(v[0]), nullptr, &gw);
                return gw; },
              .tol = 1e-4, .gradcheck = false});
  }
  // float32 conv gradients end to end through autograd (oneDNN backward primitives).
  {
    ConvGeo g{2, 3, 6, 6, 4, 3, 3};
    g.p = {1, 1};
    add_case({.name = "conv2d/f32_autograd_input_grad", .ops = kConvOps,
              .inputs = {{g.x(), DType::Float32}, {g.w(), DType::Float32}, {g.y(), DType::Float32}},
              .fn = [g](const T& x) {
                Tensor xi = x[0].detach().requires_grad_(), wi = x[1].detach().requires_grad_();
                (conv2d(xi, wi, {}, g.s, g.p) * x[2]).sum().backward();
                return xi.grad(); },
              .reference = [g](const std::vector<V>& v) {
                V gx;
                conv_grads_ref(g, to_f32(v[0]), to_f32(v[1]), to_f32(v[2]), &gx, nullptr);
                return gx; },
              .tol = 1e-4, .gradcheck = false});
  }

  const std::vector<std::string> kTOps{"conv_transpose2d", "conv2d", "conv2d_backward_weight", "sum"};
  {
    TGeo g{2, 4, 3, 3, 3, 3, 3};
    g.s = {2, 2}, g.p = {1, 1}, g.op = {1, 1};
    add_case({.name = "conv_transpose2d/output_padding_bias", .ops = kTOps,
              .inputs = {{{2, 4, 3, 3}}, {{4, 3, 3, 3}}, {{3}}},
              .fn = [g](const T& x) { return conv_transpose2d(x[0], x[1], x[2], g.s, g.p, g.op); },
              .reference = [g](const std::vector<V>& v) { return conv_transpose_ref(g, v[0], v[1], &v[2]); }});
  }
  {
    TGeo g{2, 4, 3, 4, 2, 2, 3};
    g.s = {2, 3}, g.p = {0, 1}, g.op = {1, 2}, g.d = {2, 1}, g.G = 2;
    add_case({.name = "conv_transpose2d/grouped_dilated", .ops = kTOps,
              .inputs = {{{2, 4, 3, 4}}, {{4, 2, 2, 3}}},
              .fn = [g](const T& x) { return conv_transpose2d(x[0], x[1], {}, g.s, g.p, g.op, g.G, g.d); },
              .reference = [g](const std::vector<V>& v) { return conv_transpose_ref(g, v[0], v[1], nullptr); }});
    add_case({.name = "conv_transpose2d/f32_grouped_dilated", .ops = {"conv_transpose2d"},
              .inputs = {{{2, 4, 3, 4}, DType::Float32}, {{4, 2, 2, 3}, DType::Float32}, {{4}, DType::Float32}},
              .fn = [g](const T& x) { return conv_transpose2d(x[0], x[1], x[2], g.s, g.p, g.op, g.G, g.d); },
              .reference = [g](const std::vector<V>& v) {
                V b = to_f32(v[2]);
                return conv_transpose_ref(g, to_f32(v[0]), to_f32(v[1]), &b); },
              .tol = 1e-4, .gradcheck = false});
  }
}

void linear_rows() {
  add_case({.name = "linear/2d_bias", .ops = {"linear"},
            .inputs = {{{3, 4}}, {{5, 4}}, {{5}}},
            .fn = [](const T& x) { return linear(x[0], x[1], x[2]); },
            .reference = [](const std::vector<V>& v) { return linear_ref(3, 4, 5, v[0], v[1], &v[2]); }});
  add_case({.name = "linear/3d_nobias", .ops = {"matmul"},
            .inputs = {{{2, 3, 4}}, {{5, 4}}},
            .fn = [](const T& x) { return linear(x[0], x[1]); },
            .reference = [](const std::vector<V>& v) { return linear_ref(6, 4, 5, v[0], v[1], nullptr); }});
  add_case({.name = "linear/3d_bias", .ops = {"linear"},
            .inputs = {{{2, 3, 4}}, {{5, 4}}, {{5}}},
            .fn = [](const T& x) { return linear(x[0], x[1], x[2]); },
            .reference = [](const std::vector<V>& v) { return linear_ref(6, 4, 5, v[0], v[1], &v[2]); }});
  add_case({.name = "linear/int64", .ops = {"linear"},
            .inputs = {{{2, 3}, DType::Int64, -5, 5, false}, {{4, 3}, DType::Int64, -5, 5, false},
                       {{4}, DType::Int64, -5, 5, false}},
            .fn = [](const T& x) { return linear(x[0], x[1], x[2]); },
            .reference = [](const std::vector<V>& v) { return linear_ref(2, 3, 4, v[0], v[1], &v[2]); },
            .gradcheck = false});
  // Large enough for the GEMM to be split into per-thread blocks: the bias follows each block.
  add_case({.name = "linear/f32_split", .ops = {"linear"},
            .inputs = {{{70, 96}, DType::Float32}, {{40, 96}, DType::Float32}, {{40}, DType::Float32}},
            .fn = [](const T& x) { return linear(x[0], x[1], x[2]); },
            .reference = [](const std::vector<V>& v) {
              V b = to_f32(v[2]);
              return linear_ref(70, 96, 40, to_f32(v[0]), to_f32(v[1]), &b); },
            .tol = 1e-4, .gradcheck = false});
  auto relu_of = [](V v) {
    for (auto& e : v) e = e < 0 ? 0 : e;
    return v;
  };
  add_case({.name = "linear_relu/2d", .ops = {"linear_relu"},
            .inputs = {{{3, 4}}, {{5, 4}}, {{5}}},
            .fn = [](const T& x) { return linear_relu(x[0], x[1], x[2]); },
            .reference = [relu_of](const std::vector<V>& v) { return relu_of(linear_ref(3, 4, 5, v[0], v[1], &v[2])); }});
  add_case({.name = "linear_relu/3d", .ops = {"linear_relu"},
            .inputs = {{{2, 3, 4}}, {{5, 4}}, {{5}}},
            .fn = [](const T& x) { return linear_relu(x[0], x[1], x[2]); },
            .reference = [relu_of](const std::vector<V>& v) { return relu_of(linear_ref(6, 4, 5, v[0], v[1], &v[2])); }});
  add_case({.name = "linear_relu/1d_nobias", .ops = {"matmul", "relu"},
            .inputs = {{{4}}, {{5, 4}}},
            .fn = [](const T& x) { return linear_relu(x[0], x[1]); },
            .reference = [relu_of](const std::vector<V>& v) { return relu_of(linear_ref(1, 4, 5, v[0], v[1], nullptr)); }});
  add_case({.name = "linear_relu/f32_split", .ops = {"linear_relu"},
            .inputs = {{{70, 96}, DType::Float32}, {{40, 96}, DType::Float32}, {{40}, DType::Float32}},
            .fn = [](const T& x) { return linear_relu(x[0], x[1], x[2]); },
            .reference = [relu_of](const std::vector<V>& v) {
              V b = to_f32(v[2]);
              return relu_of(linear_ref(70, 96, 40, to_f32(v[0]), to_f32(v[1]), &b)); },
            .tol = 1e-4, .gradcheck = false});
  add_case({.name = "linear/1d", .ops = {"linear"},
            .inputs = {{{4}}, {{5, 4}}, {{5}}},
            .fn = [](const T& x) { return linear(x[0], x[1], x[2]); },
            .reference = [](const std::vector<V>& v) { return linear_ref(1, 4, 5, v[0], v[1], &v[2]); }});
  add_case({.name = "linear/f32", .ops = {"linear"},
            .inputs = {{{6, 16}, DType::Float32}, {{8, 16}, DType::Float32}, {{8}, DType::Float32}},
            .fn = [](const T& x) { return linear(x[0], x[1], x[2]); },
            .reference = [](const std::vector<V>& v) {
              V b = to_f32(v[2]);
              return linear_ref(6, 16, 8, to_f32(v[0]), to_f32(v[1]), &b); },
            .tol = 1e-4, .gradcheck = false});
}

void pool_rows() {
  const std::vector<std::string> kMax{"max_pool2d", "max_pool2d_backward"};
  for (auto [g, f32] : {std::pair{PGeo{2, 3, 5, 5, 3, 3, 2, 2, 1, 1}, false}, std::pair{PGeo{2, 3, 5, 5, 2, 2, 2, 2, 0, 0}, false},
                        std::pair{PGeo{2, 3, 7, 6, 3, 2, 2, 1, 1, 1}, false}, std::pair{PGeo{2, 3, 9, 8, 3, 3, 2, 2, 1, 1}, true}}) {
    DType dt = f32 ? DType::Float32 : DType::Float64;
    std::string name = "max_pool2d/k" + std::to_string(g.kh) + std::to_string(g.kw) + "s" + std::to_string(g.sh) +
                       std::to_string(g.sw) + "p" + std::to_string(g.ph) + std::to_string(g.pw) + (f32 ? "/f32" : "");
    add_case({.name = name, .ops = kMax,
              .inputs = {{{g.N, g.C, g.H, g.W}, dt}},
              .fn = [g](const T& x) { return max_pool2d(x[0], {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw}); },
              .reference = [g, f32](const std::vector<V>& v) { return max_pool_ref(g, f32 ? to_f32(v[0]) : v[0]); },
              .tol = f32 ? 1e-6 : 1e-12, .gradcheck = !f32});
  }
  add_case({.name = "max_pool2d/int_overload_noncontiguous", .ops = kMax,
            .inputs = {{{2, 3, 6, 4}}},
            .fn = [](const T& x) { return max_pool2d(x[0].transpose(2, 3), 2, 2); },
            .reference = [](const std::vector<V>& v) {
              V xt;
              for (int64_t nc = 0; nc < 6; ++nc)
                for (int64_t h = 0; h < 4; ++h)
                  for (int64_t w = 0; w < 6; ++w) xt.push_back(v[0][size_t((nc * 6 + w) * 4 + h)]);
              return max_pool_ref(PGeo{2, 3, 4, 6, 2, 2, 2, 2, 0, 0}, xt); }});

  const std::vector<std::string> kAvg{"avg_pool2d", "avg_pool2d_backward"};
  for (bool inc : {true, false}) {
    PGeo g{2, 3, 5, 5, 3, 3, 2, 2, 1, 1};
    std::string tag = inc ? "include_pad" : "exclude_pad";
    add_case({.name = "avg_pool2d/" + tag, .ops = kAvg,
              .inputs = {{{2, 3, 5, 5}}},
              .fn = [g, inc](const T& x) { return avg_pool2d(x[0], {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw}, inc); },
              .reference = [g, inc](const std::vector<V>& v) { return avg_pool_ref(g, v[0], inc); }});
    PGeo h{2, 3, 9, 10, 3, 2, 2, 3, 1, 1};
    add_case({.name = "avg_pool2d/f32_" + tag, .ops = kAvg,
              .inputs = {{{2, 3, 9, 10}, DType::Float32}},
              .fn = [h, inc](const T& x) { return avg_pool2d(x[0], {h.kh, h.kw}, {h.sh, h.sw}, {h.ph, h.pw}, inc); },
              .reference = [h, inc](const std::vector<V>& v) { return avg_pool_ref(h, to_f32(v[0]), inc); },
              .tol = 1e-5, .gradcheck = false});
    add_case({.name = "avg_pool2d_backward/f32_" + tag, .ops = kAvg,
              .inputs = {{{2, 3, h.OH(), h.OW()}, DType::Float32}},
              .fn = [h, inc](const T& x) {
                return avg_pool2d_backward(x[0], {2, 3, 9, 10}, {h.kh, h.kw}, {h.sh, h.sw}, {h.ph, h.pw}, inc); },
              .reference = [h, inc](const std::vector<V>& v) { return avg_pool_grad_ref(h, to_f32(v[0]), inc); },
              .tol = 1e-5, .gradcheck = false});
  }
  add_case({.name = "avg_pool2d/int_overload", .ops = kAvg,
            .inputs = {{{2, 2, 6, 6}}},
            .fn = [](const T& x) { return avg_pool2d(x[0], 2, 2); },
            .reference = [](const std::vector<V>& v) { return avg_pool_ref(PGeo{2, 2, 6, 6, 2, 2, 2, 2, 0, 0}, v[0], true); }});

  const std::vector<std::string> kAd{"adaptive_avg_pool2d", "adaptive_avg_pool2d_backward"};
  for (auto [oh, ow] : {std::pair<int64_t, int64_t>{3, 4}, {1, 1}, {5, 9}}) {
    for (bool f32 : {false, true}) {
      DType dt = f32 ? DType::Float32 : DType::Float64;
      add_case({.name = "adaptive_avg_pool2d/" + std::to_string(oh) + "x" + std::to_string(ow) + (f32 ? "/f32" : ""),
                .ops = kAd, .inputs = {{{2, 3, 5, 7}, dt}},
                .fn = [oh, ow](const T& x) { return adaptive_avg_pool2d(x[0], {oh, ow}); },
                .reference = [oh, ow, f32](const std::vector<V>& v) {
                  return adaptive_ref(6, 5, 7, oh, ow, f32 ? to_f32(v[0]) : v[0]); },
                .tol = f32 ? 1e-5 : 1e-9, .gradcheck = !f32});
    }
  }

  const std::vector<std::string> kUp{"upsample_nearest2d", "upsample_nearest2d_backward"};
  for (auto [oh, ow] : {std::pair<int64_t, int64_t>{5, 7}, {6, 8}, {2, 3}}) {
    for (bool f32 : {false, true}) {
      DType dt = f32 ? DType::Float32 : DType::Float64;
      add_case({.name = "upsample_nearest2d/" + std::to_string(oh) + "x" + std::to_string(ow) + (f32 ? "/f32" : ""),
                .ops = kUp, .inputs = {{{2, 3, 3, 4}, dt}},
                .fn = [oh, ow](const T& x) { return upsample_nearest2d(x[0], {oh, ow}); },
                .reference = [oh, ow, f32](const std::vector<V>& v) {
                  return upsample_ref(6, 3, 4, oh, ow, f32 ? to_f32(v[0]) : v[0]); },
                .tol = f32 ? 1e-7 : 1e-12, .gradcheck = !f32});
    }
  }
  add_case({.name = "upsample_nearest2d/scale2", .ops = kUp, .inputs = {{{1, 2, 3, 2}}},
            .fn = [](const T& x) { return upsample_nearest2d(x[0], 2.0); },
            .reference = [](const std::vector<V>& v) { return upsample_ref(2, 3, 2, 6, 4, v[0]); }});
}

void norm_rows() {
  const std::vector<std::string> kBn{"batch_norm", "batch_norm_backward"};
  add_case({.name = "batch_norm/train_affine", .ops = kBn,
            .inputs = {{{2, 3, 5, 5}}, {{3}, DType::Float64, 0.5, 2}, {{3}}},
            .fn = [](const T& x) { return batch_norm(x[0], x[1], x[2], {}, {}, true); },
            .reference = [](const std::vector<V>& v) {
              return batch_norm_ref(2, 3, 25, v[0], &v[1], &v[2], nullptr, nullptr, 1e-5); },
            .grad_tol = 1e-5});
  add_case({.name = "batch_norm/train_noaffine_3d_running", .ops = kBn,
            .inputs = {{{4, 3, 2}}},
            .fn = [](const T& x) {
              Tensor rm = zeros({3}, DType::Float64), rv = ones({3}, DType::Float64);
              return batch_norm(x[0], {}, {}, rm, rv, true, 0.1, 1e-3); },
            .reference = [](const std::vector<V>& v) {
              return batch_norm_ref(4, 3, 2, v[0], nullptr, nullptr, nullptr, nullptr, 1e-3); }});
  add_case({.name = "batch_norm/eval", .ops = kBn,
            .inputs = {{{2, 3, 4, 4}}, {{3}}, {{3}}, {{3}, DType::Float64, -1, 1, false},
                       {{3}, DType::Float64, 0.5, 2, false}},
            .fn = [](const T& x) { return batch_norm(x[0], x[1], x[2], x[3], x[4], false); },
            .reference = [](const std::vector<V>& v) {
              return batch_norm_ref(2, 3, 16, v[0], &v[1], &v[2], &v[3], &v[4], 1e-5); }});
  add_case({.name = "batch_norm/eval_weight_only_2d", .ops = kBn,
            .inputs = {{{5, 3}}, {{3}}, {{3}, DType::Float64, -1, 1, false}, {{3}, DType::Float64, 0.5, 2, false}},
            .fn = [](const T& x) { return batch_norm(x[0], x[1], {}, x[2], x[3], false); },
            .reference = [](const std::vector<V>& v) {
              return batch_norm_ref(5, 3, 1, v[0], &v[1], nullptr, &v[2], &v[3], 1e-5); }});
  for (bool train : {true, false}) {
    add_case({.name = std::string("batch_norm/f32_") + (train ? "train" : "eval"), .ops = kBn,
              .inputs = {{{4, 5, 6, 6}, DType::Float32}, {{5}, DType::Float32}, {{5}, DType::Float32},
                         {{5}, DType::Float32, -1, 1}, {{5}, DType::Float32, 0.5, 2}},
              .fn = [train](const T& x) {
                Tensor rm = x[3].clone(), rv = x[4].clone();
                return batch_norm(x[0], x[1], x[2], rm, rv, train); },
              .reference = [train](const std::vector<V>& v) {
                V x = to_f32(v[0]), w = to_f32(v[1]), b = to_f32(v[2]), rm = to_f32(v[3]), rv = to_f32(v[4]);
                return batch_norm_ref(4, 5, 36, x, &w, &b, train ? nullptr : &rm, train ? nullptr : &rv, 1e-5); },
              .tol = 1e-4, .gradcheck = false});
  }

  const std::vector<std::string> kLn{"layer_norm", "layer_norm_backward"};
  add_case({.name = "layer_norm/last_dim_affine", .ops = kLn,
            .inputs = {{{2, 3, 4}}, {{4}}, {{4}}},
            .fn = [](const T& x) { return layer_norm(x[0], {4}, x[1], x[2]); },
            .reference = [](const std::vector<V>& v) { return layer_norm_ref(6, 4, v[0], &v[1], &v[2], 1e-5); }});
  add_case({.name = "layer_norm/two_dims_noaffine", .ops = kLn,
            .inputs = {{{2, 3, 4}}},
            .fn = [](const T& x) { return layer_norm(x[0], {3, 4}, {}, {}, 1e-3); },
            .reference = [](const std::vector<V>& v) { return layer_norm_ref(2, 12, v[0], nullptr, nullptr, 1e-3); }});
  add_case({.name = "layer_norm/bias_only_noncontiguous", .ops = kLn,
            .inputs = {{{5, 3}}, {{3}}},
            .fn = [](const T& x) { return layer_norm(x[0].transpose(0, 1), {5}, {}, x[1].sum() * ones({5}, DType::Float64)); },
            .reference = [](const std::vector<V>& v) {
              V xt;
              for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 5; ++j) xt.push_back(v[0][size_t(j * 3 + i)]);
              V b(5, v[1][0] + v[1][1] + v[1][2]);
              return layer_norm_ref(3, 5, xt, nullptr, &b, 1e-5); }});
  add_case({.name = "layer_norm/f32", .ops = kLn,
            .inputs = {{{8, 32}, DType::Float32}, {{32}, DType::Float32}, {{32}, DType::Float32}},
            .fn = [](const T& x) { return layer_norm(x[0], {32}, x[1], x[2]); },
            .reference = [](const std::vector<V>& v) {
              V w = to_f32(v[1]), b = to_f32(v[2]);
              return layer_norm_ref(8, 32, to_f32(v[0]), &w, &b, 1e-5); },
            .tol = 1e-4, .gradcheck = false});
}

}  // namespace

TERRA_OP_CASES(nn) {
  linear_rows();
  conv_rows();
  pool_rows();
  norm_rows();
}

}  // namespace terra::testing
