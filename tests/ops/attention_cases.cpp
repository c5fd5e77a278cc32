// Op-table rows for the fused scaled_dot_product_attention and its backward op: forward against a
// plain-loop double reference, gradients (q, k, v and an additive mask) by finite differences.
#include <cmath>
#include <limits>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;

enum class MaskKind { None, Bool, Float };

struct Attn {
  Shape q, k, v;  // [..., Sq, D], [..., Sk, D], [..., Sk, Dv]
  MaskKind mask = MaskKind::None;
  Shape m;  // the mask's shape, broadcasting to [..., Sq, Sk]
  bool causal = false;
  double scale = 0;  // 0: 1/sqrt(D)
};

// Flat row-major index into shape `s` of the multi-index `idx` of a shape `s` broadcasts to
// (right-aligned; size-1 dims read index 0).
int64_t bindex(const Shape& s, const std::vector<int64_t>& idx) {
  int64_t flat = 0, lead = int64_t(idx.size()) - int64_t(s.size());
  for (size_t d = 0; d < s.size(); ++d) flat = flat * s[d] + (s[d] == 1 ? 0 : idx[size_t(lead) + d]);
  return flat;
}

Shape batch_of(const Attn& a) {
  size_t r = std::max({a.q.size(), a.k.size(), a.v.size()}) - 2;
  Shape b(r, 1);
  for (const Shape* s : {&a.q, &a.k, &a.v})
    for (size_t d = 0; d + 2 < s->size(); ++d) {
      int64_t n = (*s)[d];
      if (n != 1) b[r - (s->size() - 2) + d] = n;
    }
  return b;
}

std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

// Element (i, j) of the last two dims of operand `s` (values x) for batch index `bi`.
double at(const Shape& s, const V& x, std::vector<int64_t> bi, int64_t i, int64_t j) {
  bi.push_back(i);
  bi.push_back(j);
  return x[size_t(bindex(s, bi))];
}

struct RefOut {
  V out, weights;  // [batch, Sq, Dv], [batch, Sq, Sk]
};

// softmax(q k^T * scale + mask) v in double, with torch's semantics: a fully masked row is NaN.
RefOut sdpa_ref(const Attn& a, const std::vector<V>& x) {
  const Shape batch = batch_of(a);
  const int64_t nb = numel_of(batch), Sq = a.q[a.q.size() - 2], D = a.q.back(), Sk = a.k[a.k.size() - 2],
                Dv = a.v.back();
  const double scale = a.scale != 0 ? a.scale : 1.0 / std::sqrt(double(D));
  RefOut r{V(size_t(nb * Sq * Dv)), V(size_t(nb * Sq * Sk))};
  for (int64_t b = 0; b < nb; ++b) {
    std::vector<int64_t> bi = unravel(b, batch);
    for (int64_t i = 0; i < Sq; ++i) {
      std::vector<double> s(static_cast<size_t>(Sk));
      double mx = -INFINITY;
      for (int64_t j = 0; j < Sk; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += at(a.q, x[0], bi, i, d) * at(a.k, x[1], bi, j, d);
        s[size_t(j)] = D == 0 ? 0.0 : dot * scale;  // an empty product is 0 whatever the scale
        if (a.mask == MaskKind::Float) s[size_t(j)] += at(a.m, x[3], bi, i, j);
        if (a.mask == MaskKind::Bool && at(a.m, x[3], bi, i, j) != 0) s[size_t(j)] = -INFINITY;
        if (a.causal && j > i) s[size_t(j)] = -INFINITY;
        mx = std::max(mx, s[size_t(j)]);
      }
      double z = 0;
      for (double& e : s) z += (e = std::exp(e - mx));
      for (int64_t j = 0; j < Sk; ++j) {
        double p = mx == -INFINITY ? NAN : s[size_t(j)] / z;
        r.weights[size_t((b * Sq + i) * Sk + j)] = p;
        for (int64_t c = 0; c < Dv; ++c) r.out[size_t((b * Sq + i) * Dv + c)] += p * at(a.v, x[2], bi, j, c);
      }
    }
  }
  return r;
}

// The backward op's outputs in double from grad_out g [batch, Sq, Dv] and q, k, v (full batch).
V sdpa_backward_ref(const Attn& a, const std::vector<V>& x, const V& g, int which) {
  RefOut f = sdpa_ref(a, x);
  const Shape batch = batch_of(a);
  const int64_t nb = numel_of(batch), Sq = a.q[a.q.size() - 2], D = a.q.back(), Sk = a.k[a.k.size() - 2],
                Dv = a.v.back();
  const double scale = a.scale != 0 ? a.scale : 1.0 / std::sqrt(double(D));
  V dq(size_t(nb * Sq * D)), dk(size_t(nb * Sk * D)), dv(size_t(nb * Sk * Dv));
  for (int64_t b = 0; b < nb; ++b) {
    std::vector<int64_t> bi = unravel(b, batch);
    auto P = [&](int64_t i, int64_t j) { return f.weights[size_t((b * Sq + i) * Sk + j)]; };
    auto G = [&](int64_t i, int64_t c) { return g[size_t((b * Sq + i) * Dv + c)]; };
    for (int64_t i = 0; i < Sq; ++i) {
      std::vector<double> dp(static_cast<size_t>(Sk));
      double dot = 0;
      for (int64_t j = 0; j < Sk; ++j) {
        for (int64_t c = 0; c < Dv; ++c) dp[size_t(j)] += G(i, c) * at(a.v, x[2], bi, j, c);
        dot += P(i, j) * dp[size_t(j)];
      }
      for (int64_t j = 0; j < Sk; ++j) {
        double ds = P(i, j) * (dp[size_t(j)] - dot);
        for (int64_t d = 0; d < D; ++d) {
          dq[size_t((b * Sq + i) * D + d)] += scale * ds * at(a.k, x[1], bi, j, d);
          dk[size_t((b * Sk + j) * D + d)] += scale * ds * at(a.q, x[0], bi, i, d);
        }
        for (int64_t c = 0; c < Dv; ++c) dv[size_t((b * Sk + j) * Dv + c)] += P(i, j) * G(i, c);
      }
    }
  }
  return which == 0 ? dq : which == 1 ? dk : dv;
}

std::vector<Input> inputs_of(const Attn& a, DType dt, V mask_values = {}) {
  std::vector<Input> in{{a.q, dt}, {a.k, dt}, {a.v, dt}};
  if (a.mask == MaskKind::Bool) in.push_back({.shape = a.m, .dtype = DType::Bool, .differentiable = false, .fixed = mask_values});
  if (a.mask == MaskKind::Float) in.push_back({.shape = a.m, .dtype = dt, .lo = -1, .hi = 1});
  return in;
}

Tensor call(const Attn& a, const T& x) {
  Tensor m = a.mask == MaskKind::None ? Tensor() : x[3];
  return a.scale != 0 ? scaled_dot_product_attention(x[0], x[1], x[2], m, a.causal, a.scale)
                      : scaled_dot_product_attention(x[0], x[1], x[2], m, a.causal);
}

V to_f32(V v) {
  for (auto& e : v) e = double(float(e));
  return v;
}

}  // namespace

TERRA_OP_CASES(attention) {
  const std::vector<std::string> ops{"scaled_dot_product_attention", "scaled_dot_product_attention_backward"};
  // A bool mask [3, 5] with no fully masked row (every row keeps key 0 or 1).
  const V keep_some{0, 1, 1, 0, 1, /**/ 1, 0, 0, 1, 0, /**/ 0, 0, 1, 1, 1};
  struct Row {
    std::string name;
    Attn a;
    V mask_values = {};
  };
  const std::vector<Row> rows{
      {"no_mask/batch0/Sq3_Sk5_Dv2", {{3, 4}, {5, 4}, {5, 2}}},
      {"bool_mask/batch1", {{2, 3, 4}, {2, 5, 4}, {2, 5, 3}, MaskKind::Bool, {3, 5}}, keep_some},
      {"float_mask/batch2", {{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 2}, MaskKind::Float, {2, 1, 3, 5}}},
      {"float_mask_full/batch1", {{2, 3, 2}, {2, 4, 2}, {2, 4, 3}, MaskKind::Float, {2, 3, 4}}},
      {"causal/batch2", {{1, 2, 4, 3}, {1, 2, 4, 3}, {1, 2, 4, 5}, MaskKind::None, {}, true}},
      {"causal_Sq3_Sk5_bool_mask", {{3, 2}, {5, 2}, {5, 3}, MaskKind::Bool, {3, 5}, true}, keep_some},
      {"key_padding_mask/batch2", {{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 2}, MaskKind::Bool, {2, 1, 1, 5}},
       {0, 0, 0, 1, 1, /**/ 0, 1, 0, 0, 0}},
      {"broadcast_batch", {{2, 3, 4}, {1, 5, 4}, {5, 2}}},
      {"scale", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}, MaskKind::None, {}, false, 0.3}},
      {"Sk0", {{3, 4}, {0, 4}, {0, 2}}},
      {"D0", {{3, 0}, {5, 0}, {5, 2}}},
  };
  for (const Row& r : rows) {
    const Attn a = r.a;
    add_case({.name = "sdpa/" + r.name, .ops = ops, .inputs = inputs_of(a, DType::Float64, r.mask_values),
              .fn = [a](const T& x) { return call(a, x); },
              .reference = [a](const std::vector<V>& v) { return sdpa_ref(a, v).out; }});
  }
  // Non-contiguous q and k (the layout MultiheadAttention's head split gives): transposed views.
  {
    const Attn a{{2, 3, 4}, {2, 5, 4}, {2, 5, 3}};
    add_case({.name = "sdpa/transposed_inputs", .ops = {"scaled_dot_product_attention", "transpose"},
              .inputs = {{{2, 4, 3}}, {{5, 2, 4}}, {{2, 5, 3}}},
              .fn = [a](const T& x) {
                return scaled_dot_product_attention(x[0].transpose(-2, -1), x[1].transpose(0, 1), x[2]); },
              .reference = [a](const std::vector<V>& v) {
                V q(24), k(40);
                for (int b = 0; b < 2; ++b)
                  for (int i = 0; i < 3; ++i)
                    for (int d = 0; d < 4; ++d) q[size_t((b * 3 + i) * 4 + d)] = v[0][size_t((b * 4 + d) * 3 + i)];
                for (int b = 0; b < 2; ++b)
                  for (int j = 0; j < 5; ++j)
                    for (int d = 0; d < 4; ++d) k[size_t((b * 5 + j) * 4 + d)] = v[1][size_t((j * 2 + b) * 4 + d)];
                return sdpa_ref(a, {q, k, v[2]}).out; }});
  }
  // A fully masked row is NaN, as the composed softmax(-inf row) is (and torch's).
  {
    const Attn a{{3, 2}, {4, 2}, {4, 2}, MaskKind::Bool, {3, 4}};
    add_case({.name = "sdpa/fully_masked_row_is_nan", .ops = ops,
              .inputs = inputs_of(a, DType::Float64, {0, 1, 0, 0, /**/ 1, 1, 1, 1, /**/ 0, 0, 0, 1}),
              .fn = [a](const T& x) { return call(a, x); },
              .reference = [a](const std::vector<V>& v) { return sdpa_ref(a, v).out; }, .gradcheck = false});
  }
  // float32: the sgemm path, with and without a saved-weights (grad) forward.
  {
    const Attn a{{2, 2, 33, 16}, {2, 2, 40, 16}, {2, 2, 40, 8}, MaskKind::Float, {33, 40}, true};
    add_case({.name = "sdpa/f32_causal_float_mask", .ops = ops, .inputs = inputs_of(a, DType::Float32),
              .fn = [a](const T& x) { return call(a, x); },
              .reference = [a](const std::vector<V>& v) {
                return sdpa_ref(a, {to_f32(v[0]), to_f32(v[1]), to_f32(v[2]), to_f32(v[3])}).out; },
              .tol = 2e-5, .gradcheck = false});
    const Attn b{{3, 70, 8}, {3, 300, 8}, {3, 300, 5}};  // several row blocks per batch entry
    add_case({.name = "sdpa/f32_row_blocks", .ops = ops, .inputs = inputs_of(b, DType::Float32),
              .fn = [b](const T& x) { return call(b, x); },
              .reference = [b](const std::vector<V>& v) { return sdpa_ref(b, {to_f32(v[0]), to_f32(v[1]), to_f32(v[2])}).out; },
              .tol = 2e-5, .gradcheck = false});
  }
  // The backward op called directly, with weights from the composed ops: dq, dk, dv vs the reference.
  const char* grads[] = {"dq", "dk", "dv"};
  for (int which = 0; which < 3; ++which) {
    for (DType dt : {DType::Float64, DType::Float32}) {
      const Attn a{{2, 3, 4}, {2, 5, 4}, {2, 5, 3}, MaskKind::Bool, {3, 5}, true};
      std::vector<Input> in = inputs_of(a, dt, keep_some);
      in.push_back({{2, 3, 3}, dt});  // grad_out
      const bool f32 = dt == DType::Float32;
      add_case({.name = std::string("sdpa_backward/") + grads[which] + (f32 ? "/f32" : ""),
                .ops = {"scaled_dot_product_attention_backward"}, .inputs = in,
                .fn = [which](const T& x) {
                  const double scale = 0.5;  // 1/sqrt(D)
                  Tensor s = matmul(x[0], x[1].transpose(-2, -1)) * scale;
                  s = masked_fill(s, logical_or(x[3], gt(arange(5).unsqueeze(0), arange(3).unsqueeze(1))), -INFINITY);
                  Tensor w = softmax(s, -1);
                  return scaled_dot_product_attention_backward(x[4], x[0], x[1], x[2], w, x[3], true, scale, false)[size_t(which)]; },
                .reference = [a, which, f32](const std::vector<V>& v) {
                  std::vector<V> x = v;
                  if (f32)
                    for (auto& e : x) e = to_f32(e);
                  return sdpa_backward_ref(a, x, x[4], which); },
                .tol = f32 ? 2e-5 : 1e-9, .gradcheck = false});
    }
  }
}

}  // namespace terra::testing
