// Op-table rows for softmax / log_softmax, the losses, and their backward ops.
#include <algorithm>
#include <cmath>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;

// Visits rows of a row-major tensor of shape `s` along `dim`: f(indices of the row's elements).
template <class F>
void rows_along(const Shape& s, int64_t dim, F f) {
  int64_t outer = 1, n = s[size_t(dim)], inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= s[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < s.size(); ++d) inner *= s[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<size_t> idx;
      for (int64_t j = 0; j < n; ++j) idx.push_back(size_t((o * n + j) * inner + i));
      f(idx);
    }
}

V softmax_ref(const Shape& s, int64_t dim, const V& x, bool log) {
  V out(x.size());
  rows_along(s, dim, [&](const std::vector<size_t>& idx) {
    double m = -INFINITY;
    for (size_t i : idx) m = std::max(m, x[i]);
    double z = 0;
    for (size_t i : idx) z += std::exp(x[i] - m);
    for (size_t i : idx) out[i] = log ? x[i] - m - std::log(z) : std::exp(x[i] - m) / z;
  });
  return out;
}

V as_f32(V v) {
  for (auto& e : v) e = double(float(e));
  return v;
}

Input targets(Shape s, V v) { return {.shape = std::move(s), .dtype = DType::Int64, .differentiable = false, .fixed = std::move(v)}; }

}  // namespace

TERRA_OP_CASES(softmax_loss) {
  struct S {
    Shape shape;
    int64_t dim;
  };
  for (auto [shape, dim] : {S{{3, 5}, 1}, S{{2, 3, 4}, 1}, S{{2, 3, 4}, -1}, S{{4, 3}, 0}, S{{6}, 0}}) {
    int64_t d = dim < 0 ? dim + int64_t(shape.size()) : dim;
    add_case({.name = "softmax/" + shape_str(shape) + "/dim" + std::to_string(dim),
              .ops = {"softmax"},
              .inputs = {{shape}},
              .fn = [dim](const T& x) { return softmax(x[0], dim); },
              .reference = [shape, d](const std::vector<V>& v) { return softmax_ref(shape, d, v[0], false); }});
    add_case({.name = "log_softmax/" + shape_str(shape) + "/dim" + std::to_string(dim),
              .ops = {"log_softmax"},
              .inputs = {{shape}},
              .fn = [dim](const T& x) { return log_softmax(x[0], dim); },
              .reference = [shape, d](const std::vector<V>& v) { return softmax_ref(shape, d, v[0], true); }});
  }
  // Non-contiguous input; large logits (stability: exp(1000) overflows without the max shift).
  add_case({.name = "softmax/transposed", .ops = {"softmax", "permute"}, .inputs = {{{4, 3}}},
            .fn = [](const T& x) { return softmax(x[0].t(), 1); },
            .reference = [](const std::vector<V>& v) {
              V t;
              for (int j = 0; j < 3; ++j) for (int i = 0; i < 4; ++i) t.push_back(v[0][size_t(i * 3 + j)]);
              return softmax_ref({3, 4}, 1, t, false); }});
  add_case({.name = "log_softmax/large", .ops = {"log_softmax"}, .inputs = {{{2, 4}, DType::Float64, 990, 1010}},
            .fn = [](const T& x) { return log_softmax(x[0], 1); },
            .reference = [](const std::vector<V>& v) { return softmax_ref({2, 4}, 1, v[0], true); }});
  add_case({.name = "softmax/f32", .ops = {"softmax"}, .inputs = {{{5, 7}, DType::Float32, -5, 5}},
            .fn = [](const T& x) { return softmax(x[0], 1); },
            .reference = [](const std::vector<V>& v) { return softmax_ref({5, 7}, 1, as_f32(v[0]), false); },
            .tol = 1e-6, .gradcheck = false});
  add_case({.name = "log_softmax/f32", .ops = {"log_softmax"}, .inputs = {{{3, 2, 5}, DType::Float32, -5, 5}},
            .fn = [](const T& x) { return log_softmax(x[0], 1); },
            .reference = [](const std::vector<V>& v) { return softmax_ref({3, 2, 5}, 1, as_f32(v[0]), true); },
            .tol = 1e-5, .gradcheck = false});

  // Backward ops called directly: forward formula and their own gradients (double backward).
  add_case({.name = "softmax_backward", .ops = {"softmax_backward"}, .inputs = {{{3, 4}}, {{3, 4}, DType::Float64, 0, 1}},
            .fn = [](const T& x) { return softmax_backward(x[0], x[1], 1); },
            .reference = [](const std::vector<V>& v) {
              V o(12);
              for (int i = 0; i < 3; ++i) {
                double s = 0;
                for (int j = 0; j < 4; ++j) s += v[0][size_t(i * 4 + j)] * v[1][size_t(i * 4 + j)];
                for (int j = 0; j < 4; ++j) o[size_t(i * 4 + j)] = v[1][size_t(i * 4 + j)] * (v[0][size_t(i * 4 + j)] - s);
              }
              return o; }});
  // As used by autograd: y is a log-softmax output.
  add_case({.name = "log_softmax_backward", .ops = {"log_softmax_backward", "log_softmax"},
            .inputs = {{{2, 3, 2}}, {{2, 3, 2}}},
            .fn = [](const T& x) { return log_softmax_backward(x[0], log_softmax(x[1], 1), 1); },
            .reference = [](const std::vector<V>& v) {
              V y = softmax_ref({2, 3, 2}, 1, v[1], true), o(12);
              rows_along({2, 3, 2}, 1, [&](const std::vector<size_t>& idx) {
                double s = 0;
                for (size_t i : idx) s += v[0][i];
                for (size_t i : idx) o[i] = v[0][i] - std::exp(y[i]) * s;
              });
              return o; }});

  add_case({.name = "log_softmax_backward/any_y", .ops = {"log_softmax_backward"}, .inputs = {{{3, 4}}, {{3, 4}}},
            .fn = [](const T& x) { return log_softmax_backward(x[0], x[1], 1); },
            .reference = [](const std::vector<V>& v) {
              V o(12);
              for (int i = 0; i < 3; ++i) {
                double s = 0;
                for (int j = 0; j < 4; ++j) s += v[0][size_t(i * 4 + j)];
                for (int j = 0; j < 4; ++j) o[size_t(i * 4 + j)] = v[0][size_t(i * 4 + j)] - std::exp(v[1][size_t(i * 4 + j)]) * s;
              }
              return o; }});

  add_case({.name = "nll_loss/direct", .ops = {"nll_loss"}, .inputs = {{{3, 4}}, targets({3}, {3, 0, 2})},
            .fn = [](const T& x) { return nll_loss(x[0], x[1], -100, "none"); },
            .reference = [](const std::vector<V>& v) { return V{-v[0][3], -v[0][4], -v[0][10]}; }});
  for (int64_t red : {0, 1, 2}) {
    Shape gs = red == 0 ? Shape{4} : Shape{};
    add_case({.name = "nll_loss_backward/red" + std::to_string(red), .ops = {"nll_loss_backward"},
              .inputs = {{gs}, targets({4}, {1, 0, -1, 2})},
              .fn = [red](const T& x) { return nll_loss_backward(x[0], x[1], {4, 3}, -1, red); },
              .reference = [red](const std::vector<V>& v) {
                V o(12, 0.0);
                int64_t t[4] = {1, 0, -1, 2};
                for (int n = 0; n < 4; ++n) {
                  if (t[n] < 0) continue;
                  double g = red == 0 ? v[0][size_t(n)] : v[0][0];
                  o[size_t(n * 3 + t[n])] = red == 1 ? -g / 3.0 : -g;
                }
                return o; }});
  }

  // mse_loss: composed of sub, mul, sum (and div for the mean).
  for (std::string red : {"mean", "sum", "none"}) {
    add_case({.name = "mse_loss/" + red, .ops = {"sub", "mul", "sum"}, .inputs = {{{3, 4}}, {{3, 4}}},
              .fn = [red](const T& x) { return mse_loss(x[0], x[1], red); },
              .reference = [red](const std::vector<V>& v) {
                V o;
                double s = 0;
                for (size_t i = 0; i < v[0].size(); ++i) {
                  double d = v[0][i] - v[1][i];
                  o.push_back(d * d);
                  s += d * d;
                }
                if (red == "none") return o;
                return V{red == "sum" ? s : s / double(o.size())}; }});
  }

  // BCE with logits; the reference uses the textbook (unstable) form on moderate logits.
  for (std::string red : {"mean", "sum", "none"}) {
    add_case({.name = "bce_with_logits/" + red,
              .ops = {"binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits_backward"},
              .inputs = {{{2, 5}, DType::Float64, -6, 6}, {{2, 5}, DType::Float64, 0, 1}},
              .fn = [red](const T& x) { return binary_cross_entropy_with_logits(x[0], x[1], red); },
              .reference = [red](const std::vector<V>& v) {
                V o;
                double s = 0;
                for (size_t i = 0; i < v[0].size(); ++i) {
                  double p = 1 / (1 + std::exp(-v[0][i])), t = v[1][i];
                  double l = -(t * std::log(p) + (1 - t) * std::log(1 - p));
                  o.push_back(l);
                  s += l;
                }
                if (red == "none") return o;
                return V{red == "sum" ? s : s / double(o.size())}; }});
  }
  add_case({.name = "bce_with_logits/extreme", .ops = {"binary_cross_entropy_with_logits"},
            .inputs = {{.shape = {4}, .fixed = {-800, -30, 30, 800}}, {.shape = {4}, .fixed = {1, 0, 1, 0}}},
            .fn = [](const T& x) { return binary_cross_entropy_with_logits(x[0], x[1], "none"); },
            .reference = [](const std::vector<V>&) { return V{800, std::log1p(std::exp(-30.0)), std::log1p(std::exp(-30.0)), 800}; },
            .tol = 1e-12});
  add_case({.name = "bce_with_logits/f32", .ops = {"binary_cross_entropy_with_logits"},
            .inputs = {{{8}, DType::Float32, -4, 4}, {{8}, DType::Float32, 0, 1}},
            .fn = [](const T& x) { return binary_cross_entropy_with_logits(x[0], x[1], "none"); },
            .reference = [](const std::vector<V>& v) {
              V o;
              for (size_t i = 0; i < 8; ++i) {
                double x = double(float(v[0][i])), t = double(float(v[1][i]));
                double p = 1 / (1 + std::exp(-x));
                o.push_back(-(t * std::log(p) + (1 - t) * std::log(1 - p)));
              }
              return o; },
            .tol = 1e-6, .gradcheck = false});
  add_case({.name = "bce_with_logits_backward", .ops = {"binary_cross_entropy_with_logits_backward"},
            .inputs = {{{2, 3}}, {{2, 3}, DType::Float64, -3, 3}, {{2, 3}, DType::Float64, 0, 1}},
            .fn = [](const T& x) { return binary_cross_entropy_with_logits_backward(x[0], x[1], x[2]); },
            .reference = [](const std::vector<V>& v) {
              V o;
              for (size_t i = 0; i < 6; ++i) o.push_back(v[0][i] * (1 / (1 + std::exp(-v[1][i])) - v[2][i]));
              return o; }});
}

}  // namespace terra::testing
