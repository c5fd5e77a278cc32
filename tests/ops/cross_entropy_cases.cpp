// Op-table rows for the fused cross_entropy op and its backward: values against plain double
// loops over [N, C, R] logits, gradients by float64 finite differences (the backward op's rows
// check the double backward).
#include <cmath>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;

// log(sum_j exp(x)) of every (n, r) row of [N, C, R] logits, in row order.
V lse_ref(int64_t n, int64_t c, int64_t r, const V& x) {
  V out;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t k = 0; k < r; ++k) {
      double z = 0;
      for (int64_t j = 0; j < c; ++j) z += std::exp(x[size_t((a * c + j) * r + k)]);
      out.push_back(std::log(z));
    }
  return out;
}

V ce_ref(int64_t n, int64_t c, int64_t r, const V& x, const V& t, int64_t ignore, const std::string& red) {
  V lse = lse_ref(n, c, r, x), per;
  double total = 0;
  int64_t used = 0;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t k = 0; k < r; ++k) {
      int64_t cls = int64_t(t[size_t(a * r + k)]);
      if (cls == ignore) {
        per.push_back(0);
        continue;
      }
      double l = lse[size_t(a * r + k)] - x[size_t((a * c + cls) * r + k)];
      per.push_back(l);
      total += l;
      ++used;
    }
  if (red == "none") return per;
  if (red == "sum") return {total};
  return {total / double(used)};
}

// (exp(x - lse) - onehot) * grad, / used for mean, 0 on ignored rows; lse given (any values).
V ce_bw_ref(int64_t n, int64_t c, int64_t r, const V& g, const V& x, const V& t, const V& lse, int64_t ignore,
            int64_t red) {
  int64_t used = 0;
  for (double v : t) used += int64_t(v) != ignore;
  V out(size_t(n * c * r), 0.0);
  for (int64_t a = 0; a < n; ++a)
    for (int64_t k = 0; k < r; ++k) {
      size_t q = size_t(a * r + k);
      int64_t cls = int64_t(t[q]);
      if (cls == ignore) continue;
      double s = (red == 0 ? g[q] : g[0]) / (red == 1 ? double(used) : 1.0);
      for (int64_t j = 0; j < c; ++j) {
        size_t i = size_t((a * c + j) * r + k);
        out[i] = (std::exp(x[i] - lse[q]) - (j == cls ? 1.0 : 0.0)) * s;
      }
    }
  return out;
}

V as_f32(V v) {
  for (auto& e : v) e = double(float(e));
  return v;
}

Input targets(Shape s, V v) { return {.shape = std::move(s), .dtype = DType::Int64, .differentiable = false, .fixed = std::move(v)}; }

const std::vector<std::string> kOps = {"cross_entropy", "cross_entropy_backward"};

}  // namespace

TERRA_OP_CASES(cross_entropy) {
  for (std::string red : {"mean", "sum", "none"}) {
    add_case({.name = "cross_entropy/" + red, .ops = kOps, .inputs = {{{4, 5}}, targets({4}, {0, 3, 4, 1})},
              .fn = [red](const T& x) { return cross_entropy(x[0], x[1], -100, red); },
              .reference = [red](const std::vector<V>& v) { return ce_ref(4, 5, 1, v[0], v[1], -100, red); }});
    add_case({.name = "cross_entropy/ignore/" + red, .ops = kOps, .inputs = {{{4, 3}}, targets({4}, {2, -100, 0, -100})},
              .fn = [red](const T& x) { return cross_entropy(x[0], x[1], -100, red); },
              .reference = [red](const std::vector<V>& v) { return ce_ref(4, 3, 1, v[0], v[1], -100, red); }});
    add_case({.name = "cross_entropy/spatial/" + red, .ops = kOps,
              .inputs = {{{2, 3, 2, 2}}, targets({2, 2, 2}, {0, 2, 1, 1, 2, 0, 0, 1})},
              .fn = [red](const T& x) { return cross_entropy(x[0], x[1], 1, red); },  // class 1 ignored
              .reference = [red](const std::vector<V>& v) { return ce_ref(2, 3, 4, v[0], v[1], 1, red); }});
  }
  // 19 classes: two full 8-wide lanes and a 3-element tail per row.
  add_case({.name = "cross_entropy/wide", .ops = kOps, .inputs = {{{3, 19}, DType::Float64, -4, 4}, targets({3}, {18, 0, 9})},
            .fn = [](const T& x) { return cross_entropy(x[0], x[1], -100, "none"); },
            .reference = [](const std::vector<V>& v) { return ce_ref(3, 19, 1, v[0], v[1], -100, "none"); }});
  add_case({.name = "cross_entropy/1d", .ops = kOps, .inputs = {{{5}}, targets({}, {3})},
            .fn = [](const T& x) { return cross_entropy(x[0], x[1]); },
            .reference = [](const std::vector<V>& v) { return ce_ref(1, 5, 1, v[0], v[1], -100, "mean"); }});
  add_case({.name = "cross_entropy/f32", .ops = kOps, .inputs = {{{6, 4}, DType::Float32}, targets({6}, {0, 1, 2, 3, 3, 0})},
            .fn = [](const T& x) { return cross_entropy(x[0], x[1]); },
            .reference = [](const std::vector<V>& v) { return ce_ref(6, 4, 1, as_f32(v[0]), v[1], -100, "mean"); },
            .tol = 1e-6, .gradcheck = false});
  // float32 with large logits (vexp across its range) and a long row; 1e-6 relative.
  add_case({.name = "cross_entropy/f32/wide", .ops = kOps,
            .inputs = {{{3, 100}, DType::Float32, -30, 30}, targets({3}, {5, 99, 64})},
            .fn = [](const T& x) { return cross_entropy(x[0], x[1], -100, "none"); },
            .reference = [](const std::vector<V>& v) { return ce_ref(3, 100, 1, as_f32(v[0]), v[1], -100, "none"); },
            .tol = 1e-6, .gradcheck = false});
  add_case({.name = "cross_entropy/f32/spatial", .ops = kOps,
            .inputs = {{{2, 11, 3}, DType::Float32, -10, 10}, targets({2, 3}, {0, 10, 5, -100, 3, 7})},
            .fn = [](const T& x) { return cross_entropy(x[0], x[1], -100, "sum"); },
            .reference = [](const std::vector<V>& v) { return ce_ref(2, 11, 3, as_f32(v[0]), v[1], -100, "sum"); },
            .tol = 1e-6, .gradcheck = false});

  // The saved logsumexp as an output: its gradient (softmax * grad) reaches the logits too.
  add_case({.name = "cross_entropy_forward/lse", .ops = kOps, .inputs = {{{3, 4, 2}}, targets({3, 2}, {0, -100, 3, 1, 2, 2})},
            .fn = [](const T& x) { return cross_entropy_forward(x[0], x[1])[1]; },
            .reference = [](const std::vector<V>& v) { return lse_ref(3, 4, 2, v[0]); }});
  add_case({.name = "cross_entropy_forward/both", .ops = kOps, .inputs = {{{4, 3}}, targets({4}, {0, 2, -100, 1})},
            .fn = [](const T& x) {
              T r = cross_entropy_forward(x[0], x[1], -100, "none");
              return r[0] * 2.0 + r[1];
            },
            .reference = [](const std::vector<V>& v) {
              V l = ce_ref(4, 3, 1, v[0], v[1], -100, "none"), s = lse_ref(4, 3, 1, v[0]);
              for (size_t i = 0; i < l.size(); ++i) l[i] = 2 * l[i] + s[i];
              return l; }});

  // The backward op called directly, lse an independent input: checks its own gradient (double
  // backward) with respect to grad, logits and lse.
  for (int64_t red : {0, 1, 2}) {
    Shape gs = red == 0 ? Shape{4} : Shape{};
    add_case({.name = "cross_entropy_backward/red" + std::to_string(red), .ops = {"cross_entropy_backward"},
              .inputs = {{gs}, {{4, 3}}, targets({4}, {1, 0, -1, 2}), {{4}}},
              .fn = [red](const T& x) { return cross_entropy_backward(x[0], x[1], x[2], x[3], -1, red); },
              .reference = [red](const std::vector<V>& v) { return ce_bw_ref(4, 3, 1, v[0], v[1], v[2], v[3], -1, red); }});
  }
  add_case({.name = "cross_entropy_backward/spatial", .ops = {"cross_entropy_backward"},
            .inputs = {{{2, 2}}, {{2, 3, 2}}, targets({2, 2}, {1, 0, 7, 2}), {{2, 2}}},
            .fn = [](const T& x) { return cross_entropy_backward(x[0], x[1], x[2], x[3], 7, 0); },
            .reference = [](const std::vector<V>& v) { return ce_bw_ref(2, 3, 2, v[0], v[1], v[2], v[3], 7, 0); }});
  add_case({.name = "cross_entropy_backward/f32", .ops = {"cross_entropy_backward"},
            .inputs = {{{}, DType::Float32}, {{5, 21}, DType::Float32, -8, 8}, targets({5}, {20, 0, -100, 7, 3}),
                       {{5}, DType::Float32, 2, 4}},
            .fn = [](const T& x) { return cross_entropy_backward(x[0], x[1], x[2], x[3], -100, 1); },
            .reference = [](const std::vector<V>& v) {
              return ce_bw_ref(5, 21, 1, as_f32(v[0]), as_f32(v[1]), v[2], as_f32(v[3]), -100, 1); },
            .tol = 1e-6, .gradcheck = false});
}

}  // namespace terra::testing
