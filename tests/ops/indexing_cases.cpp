// Op-table rows for cat/stack/split/chunk, index_select, gather, embedding (+ backward ops), eye.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;

Input idx(Shape s, V v) { return {.shape = std::move(s), .dtype = DType::Int64, .differentiable = false, .fixed = std::move(v)}; }

// Row-major [outer, n, inner] access.
struct L3 {
  int64_t outer = 1, n = 1, inner = 1;
};
L3 around(const Shape& s, int64_t dim) {
  L3 l;
  for (int64_t d = 0; d < dim; ++d) l.outer *= s[size_t(d)];
  l.n = s[size_t(dim)];
  for (size_t d = size_t(dim) + 1; d < s.size(); ++d) l.inner *= s[d];
  return l;
}

V cat_ref(const std::vector<Shape>& shapes, const std::vector<V>& vals, int64_t dim) {
  V out;
  int64_t outer = around(shapes[0], dim).outer;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < shapes.size(); ++k) {
      L3 l = around(shapes[k], dim);
      for (int64_t j = 0; j < l.n * l.inner; ++j) out.push_back(vals[k][size_t(o * l.n * l.inner + j)]);
    }
  return out;
}

V index_select_ref(const Shape& s, int64_t dim, const V& x, const V& index) {
  L3 l = around(s, dim);
  V out;
  for (int64_t o = 0; o < l.outer; ++o)
    for (double j : index)
      for (int64_t i = 0; i < l.inner; ++i) out.push_back(x[size_t((o * l.n + int64_t(j)) * l.inner + i)]);
  return out;
}

// Multi-index helpers for gather on small ranks.
std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> c(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    c[d] = flat % s[d];
    flat /= s[d];
  }
  return c;
}
int64_t ravel(const std::vector<int64_t>& c, const Shape& s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + c[d];
  return f;
}
V gather_ref(const Shape& xs, int64_t dim, const V& x, const Shape& is, const V& index) {
  V out;
  for (int64_t f = 0; f < numel_of(is); ++f) {
    auto c = unravel(f, is);
    c[size_t(dim)] = int64_t(index[size_t(f)]);
    out.push_back(x[size_t(ravel(c, xs))]);
  }
  return out;
}

V transpose_ref(int64_t r, int64_t c, const V& x) {  // x is [r, c] -> [c, r]
  V o;
  for (int64_t j = 0; j < c; ++j)
    for (int64_t i = 0; i < r; ++i) o.push_back(x[size_t(i * c + j)]);
  return o;
}

}  // namespace

TERRA_OP_CASES(indexing) {
  // ---- cat / stack
  add_case({.name = "cat/dim0", .ops = {"cat", "slice", "slice_backward"}, .inputs = {{{2, 3}}, {{1, 3}}, {{3, 3}}},
            .fn = [](const T& x) { return cat({x[0], x[1], x[2]}, 0); },
            .reference = [](const std::vector<V>& v) { return cat_ref({{2, 3}, {1, 3}, {3, 3}}, v, 0); }});
  add_case({.name = "cat/dim1_negative", .ops = {"cat"}, .inputs = {{{2, 2, 3}}, {{2, 1, 3}}},
            .fn = [](const T& x) { return cat({x[0], x[1]}, -2); },
            .reference = [](const std::vector<V>& v) { return cat_ref({{2, 2, 3}, {2, 1, 3}}, v, 1); }});
  add_case({.name = "cat/last_noncontiguous", .ops = {"cat", "permute"}, .inputs = {{{3, 2}}, {{2, 3}}},
            .fn = [](const T& x) { return cat({x[0].t(), x[1]}, 1); },
            .reference = [](const std::vector<V>& v) { return cat_ref({{2, 3}, {2, 3}}, {transpose_ref(3, 2, v[0]), v[1]}, 1); }});
  add_case({.name = "cat/same_tensor_twice", .ops = {"cat"}, .inputs = {{{2, 2}}},
            .fn = [](const T& x) { return cat({x[0], x[0]}, 1); },
            .reference = [](const std::vector<V>& v) { return cat_ref({{2, 2}, {2, 2}}, {v[0], v[0]}, 1); }});
  add_case({.name = "cat/f32", .ops = {"cat"}, .inputs = {{{2, 3}, DType::Float32}, {{2, 2}, DType::Float32}},
            .fn = [](const T& x) { return cat({x[0], x[1]}, 1); },
            .reference = [](const std::vector<V>& v) {
              V a = v[0], b = v[1];
              for (auto& e : a) e = double(float(e));
              for (auto& e : b) e = double(float(e));
              return cat_ref({{2, 3}, {2, 2}}, {a, b}, 1); },
            .tol = 0, .gradcheck = false});
  add_case({.name = "cat/int64", .ops = {"cat"}, .inputs = {idx({2}, {4, 5}), idx({3}, {1, 2, 3})},
            .fn = [](const T& x) { return cat({x[0], x[1]}, 0); },
            .reference = [](const std::vector<V>&) { return V{4, 5, 1, 2, 3}; }, .gradcheck = false});
  add_case({.name = "stack/dim1", .ops = {"cat", "view"}, .inputs = {{{2, 3}}, {{2, 3}}},
            .fn = [](const T& x) { return stack({x[0], x[1]}, 1); },
            .reference = [](const std::vector<V>& v) {
              V o;
              for (int i = 0; i < 2; ++i)
                for (int k = 0; k < 2; ++k)
                  for (int j = 0; j < 3; ++j) o.push_back(v[size_t(k)][size_t(i * 3 + j)]);
              return o; }});
  add_case({.name = "stack/last", .ops = {"cat", "view"}, .inputs = {{{3}}, {{3}}, {{3}}},
            .fn = [](const T& x) { return stack({x[0], x[1], x[2]}, -1); },
            .reference = [](const std::vector<V>& v) {
              V o;
              for (int j = 0; j < 3; ++j) for (int k = 0; k < 3; ++k) o.push_back(v[size_t(k)][size_t(j)]);
              return o; }});

  // ---- split / chunk are slices; the rows reorder the pieces so each piece's identity matters.
  add_case({.name = "split/size", .ops = {"slice", "cat"}, .inputs = {{{5, 2}}},
            .fn = [](const T& x) {
              auto p = split(x[0], 2, 0);  // [2, 2, 1]
              return cat({p[2], p[0], p[1] * 3.0}, 0); },
            .reference = [](const std::vector<V>& v) {
              const V& a = v[0];
              return V{a[8], a[9], a[0], a[1], a[2], a[3], 3 * a[4], 3 * a[5], 3 * a[6], 3 * a[7]}; }});
  add_case({.name = "split/sizes", .ops = {"slice", "cat"}, .inputs = {{{2, 6}}},
            .fn = [](const T& x) {
              auto p = split(x[0], std::vector<int64_t>{1, 3, 2}, 1);
              return cat({p[1], p[2] * 2.0, p[0]}, 1); },
            .reference = [](const std::vector<V>& v) {
              V o;
              for (int r = 0; r < 2; ++r) {
                const double* a = v[0].data() + r * 6;
                for (double e : {a[1], a[2], a[3], 2 * a[4], 2 * a[5], a[0]}) o.push_back(e);
              }
              return o; }});
  add_case({.name = "chunk", .ops = {"slice", "cat"}, .inputs = {{{7}}},
            .fn = [](const T& x) {
              auto p = chunk(x[0], 3, 0);  // sizes 3, 3, 1
              return cat({p[2], p[1], p[0] * -1.0}, 0); },
            .reference = [](const std::vector<V>& v) {
              const V& a = v[0];
              return V{a[6], a[3], a[4], a[5], -a[0], -a[1], -a[2]}; }});

  // ---- index_select (+ backward)
  add_case({.name = "index_select/dim0", .ops = {"index_select", "index_select_backward"},
            .inputs = {{{4, 3}}, idx({5}, {3, 0, 3, 1, 3})},
            .fn = [](const T& x) { return index_select(x[0], 0, x[1]); },
            .reference = [](const std::vector<V>& v) { return index_select_ref({4, 3}, 0, v[0], v[1]); }});
  add_case({.name = "index_select/dim1", .ops = {"index_select", "index_select_backward"},
            .inputs = {{{2, 4, 3}}, idx({3}, {2, 2, 0})},
            .fn = [](const T& x) { return index_select(x[0], -2, x[1]); },
            .reference = [](const std::vector<V>& v) { return index_select_ref({2, 4, 3}, 1, v[0], v[1]); }});
  add_case({.name = "index_select/noncontiguous", .ops = {"index_select", "permute"},
            .inputs = {{{3, 4}}, idx({2}, {1, 2})},
            .fn = [](const T& x) { return index_select(x[0].t(), 1, x[1]); },
            .reference = [](const std::vector<V>& v) { return index_select_ref({4, 3}, 1, transpose_ref(3, 4, v[0]), v[1]); }});
  add_case({.name = "index_select/f32", .ops = {"index_select"}, .inputs = {{{4, 2}, DType::Float32}, idx({3}, {1, 1, 0})},
            .fn = [](const T& x) { return index_select(x[0], 0, x[1]); },
            .reference = [](const std::vector<V>& v) {
              V a = v[0];
              for (auto& e : a) e = double(float(e));
              return index_select_ref({4, 2}, 0, a, v[1]); },
            .tol = 0, .gradcheck = false});
  add_case({.name = "index_select_backward", .ops = {"index_select_backward"},
            .inputs = {{{2, 3}}, idx({3}, {1, 3, 1})},
            .fn = [](const T& x) { return index_select_backward(x[0], {2, 4}, 1, x[1]); },
            .reference = [](const std::vector<V>& v) {
              V o(8, 0.0);
              int64_t ix[3] = {1, 3, 1};
              for (int r = 0; r < 2; ++r) for (int j = 0; j < 3; ++j) o[size_t(r * 4 + ix[j])] += v[0][size_t(r * 3 + j)];
              return o; }});

  // ---- gather (+ backward)
  add_case({.name = "gather/dim1", .ops = {"gather", "gather_backward"},
            .inputs = {{{3, 4}}, idx({3, 2}, {0, 3, 1, 1, 2, 0})},
            .fn = [](const T& x) { return gather(x[0], 1, x[1]); },
            .reference = [](const std::vector<V>& v) { return gather_ref({3, 4}, 1, v[0], {3, 2}, v[1]); }});
  add_case({.name = "gather/dim0_smaller_index", .ops = {"gather", "gather_backward"},
            .inputs = {{{3, 4, 2}}, idx({4, 2, 1}, {2, 0, 1, 1, 0, 0, 2, 2})},
            .fn = [](const T& x) { return gather(x[0], 0, x[1]); },
            .reference = [](const std::vector<V>& v) { return gather_ref({3, 4, 2}, 0, v[0], {4, 2, 1}, v[1]); }});
  add_case({.name = "gather/noncontiguous", .ops = {"gather", "permute"},
            .inputs = {{{4, 3}}, idx({3, 2}, {3, 0, 2, 2, 1, 0})},
            .fn = [](const T& x) { return gather(x[0].t(), -1, x[1]); },
            .reference = [](const std::vector<V>& v) { return gather_ref({3, 4}, 1, transpose_ref(4, 3, v[0]), {3, 2}, v[1]); }});
  add_case({.name = "gather/f32", .ops = {"gather"}, .inputs = {{{2, 3}, DType::Float32}, idx({2, 2}, {2, 0, 1, 1})},
            .fn = [](const T& x) { return gather(x[0], 1, x[1]); },
            .reference = [](const std::vector<V>& v) {
              V a = v[0];
              for (auto& e : a) e = double(float(e));
              return gather_ref({2, 3}, 1, a, {2, 2}, v[1]); },
            .tol = 0, .gradcheck = false});
  add_case({.name = "gather_backward", .ops = {"gather_backward"},
            .inputs = {{{2, 3}}, idx({2, 3}, {0, 2, 0, 1, 1, 1})},
            .fn = [](const T& x) { return gather_backward(x[0], {2, 4}, 1, x[1]); },
            .reference = [](const std::vector<V>& v) {
              V o(8, 0.0);
              for (int r = 0; r < 2; ++r) for (int j = 0; j < 3; ++j) o[size_t(r * 4 + int(v[1][size_t(r * 3 + j)]))] += v[0][size_t(r * 3 + j)];
              return o; }});

  // ---- embedding (+ backward)
  auto emb_ref = [](const V& w, const V& ix, int64_t d) {
    V o;
    for (double i : ix) for (int64_t c = 0; c < d; ++c) o.push_back(w[size_t(int64_t(i) * d + c)]);
    return o;
  };
  add_case({.name = "embedding", .ops = {"embedding", "embedding_backward"},
            .inputs = {{{5, 3}}, idx({2, 3}, {4, 0, 4, 2, 2, 1})},
            .fn = [](const T& x) { return embedding(x[0], x[1]); },
            .reference = [emb_ref](const std::vector<V>& v) { return emb_ref(v[0], v[1], 3); }});
  // padding_idx: forward still reads the row; its gradient is zero (so no finite-difference check).
  add_case({.name = "embedding/padding_forward", .ops = {"embedding"},
            .inputs = {{{4, 2}}, idx({3}, {3, 0, 3})},
            .fn = [](const T& x) { return embedding(x[0], x[1], -1); },
            .reference = [emb_ref](const std::vector<V>& v) { return emb_ref(v[0], v[1], 2); }, .gradcheck = false});
  add_case({.name = "embedding/f32", .ops = {"embedding"}, .inputs = {{{3, 4}, DType::Float32}, idx({2}, {2, 0})},
            .fn = [](const T& x) { return embedding(x[0], x[1]); },
            .reference = [emb_ref](const std::vector<V>& v) {
              V a = v[0];
              for (auto& e : a) e = double(float(e));
              return emb_ref(a, v[1], 4); },
            .tol = 0, .gradcheck = false});
  add_case({.name = "embedding_backward/padding", .ops = {"embedding_backward", "embedding"},
            .inputs = {{{4, 2}}, idx({4}, {1, 3, 1, 0})},
            .fn = [](const T& x) { return embedding_backward(x[0], x[1], 5, 3); },
            .reference = [](const std::vector<V>& v) {
              V o(10, 0.0);
              int64_t ix[4] = {1, 3, 1, 0};
              for (int i = 0; i < 4; ++i)
                if (ix[i] != 3) for (int c = 0; c < 2; ++c) o[size_t(ix[i] * 2 + c)] += v[0][size_t(i * 2 + c)];
              return o; }});

  // ---- eye
  add_case({.name = "eye/rect", .ops = {"eye"}, .inputs = {},
            .fn = [](const T&) { return eye(2, 3, DType::Float64); },
            .reference = [](const std::vector<V>&) { return V{1, 0, 0, 0, 1, 0}; }, .gradcheck = false});
  add_case({.name = "eye/square_f32", .ops = {"eye"}, .inputs = {},
            .fn = [](const T&) { return eye(3); },
            .reference = [](const std::vector<V>&) { return V{1, 0, 0, 0, 1, 0, 0, 0, 1}; }, .gradcheck = false});
}

// The padding row is read by the forward but gets no gradient (torch's padding_idx).
TEST(Embedding, PaddingRowGetsNoGradient) {
  Tensor w = tensor_f64({1, 2, 3, 4, 5, 6}, {3, 2}).requires_grad_();
  Tensor ix = tensor(std::vector<int64_t>{0, 2, 2, 1}, {4});
  Tensor out = embedding(w, ix, 2);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, 2, 5, 6, 5, 6, 3, 4}));
  out.sum().backward();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{1, 1, 1, 1, 0, 0}));
}

TEST(Split, PiecesAreViewsWithTorchSizes) {
  Tensor x = arange(0, 10, 1, DType::Float32).reshape({10});
  auto p = split(x, 4);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[2].shape(), (Shape{2}));
  EXPECT_EQ(p[1].to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(p[1].impl()->storage, x.impl()->storage);  // a view, no copy
  auto c = chunk(x, 4);  // ceil(10 / 4) = 3 -> 3, 3, 3, 1
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[3].shape(), (Shape{1}));
  auto c2 = chunk(arange(0, 6, 1, DType::Float32), 4);  // ceil(6 / 4) = 2 -> 3 pieces, as torch
  EXPECT_EQ(c2.size(), 3u);
}

}  // namespace terra::testing

namespace terra::testing {

// Inputs big enough for the kernels' parallel paths (the table rows are small and serial).
TEST(IndexingLarge, ParallelPathsMatchLoops) {
  const int64_t R = 400, C = 150;
  std::vector<double> xv(size_t(R * C));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(double(i) * 0.37);
  Tensor x = tensor_f64(xv, {R, C});
  std::vector<int64_t> iv(size_t(R * C));
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = int64_t((i * 7919) % size_t(C));
  Tensor ix = tensor(iv, {R, C});

  auto g = gather(x, 1, ix).to_vector<double>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) ASSERT_EQ(g[size_t(r * C + c)], xv[size_t(r * C + iv[size_t(r * C + c)])]);

  std::vector<int64_t> rows(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) rows[size_t(r)] = (r * 13) % R;
  auto s = index_select(x, 0, tensor(rows, {R})).to_vector<double>();
  auto e = embedding(x, tensor(rows, {R})).to_vector<double>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      ASSERT_EQ(s[size_t(r * C + c)], xv[size_t(rows[size_t(r)] * C + c)]);
      ASSERT_EQ(e[size_t(r * C + c)], xv[size_t(rows[size_t(r)] * C + c)]);
    }

  auto sm = softmax(x, 1).to_vector<double>();
  auto sm0 = softmax(x, 0).to_vector<double>();
  for (int64_t r = 0; r < R; ++r) {
    double z = 0;
    for (int64_t c = 0; c < C; ++c) z += std::exp(xv[size_t(r * C + c)]);
    for (int64_t c = 0; c < C; ++c) ASSERT_NEAR(sm[size_t(r * C + c)], std::exp(xv[size_t(r * C + c)]) / z, 1e-14);
  }
  for (int64_t c = 0; c < C; ++c) {
    double z = 0;
    for (int64_t r = 0; r < R; ++r) z += std::exp(xv[size_t(r * C + c)]);
    for (int64_t r = 0; r < R; ++r) ASSERT_NEAR(sm0[size_t(r * C + c)], std::exp(xv[size_t(r * C + c)]) / z, 1e-14);
  }

  Tensor big = cat({x, x * 2.0, x.t().contiguous().reshape({R, C})}, 0);
  EXPECT_EQ(big.shape(), (Shape{3 * R, C}));
  auto bv = big.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    ASSERT_EQ(bv[i], xv[i]);
    ASSERT_EQ(bv[xv.size() + i], 2 * xv[i]);
  }

  // Scatter-add backward with many collisions: embedding and gather gradients sum every use.
  Tensor w = tensor_f64(xv, {R, C}).requires_grad_();
  embedding(w, tensor(rows, {R})).sum().backward();
  std::vector<double> uses(size_t(R), 0);
  for (int64_t r : rows) uses[size_t(r)] += 1;
  auto wg = w.grad().to_vector<double>();
  for (int64_t r = 0; r < R; ++r) ASSERT_EQ(wg[size_t(r * C)], uses[size_t(r)]);
}

}  // namespace terra::testing
