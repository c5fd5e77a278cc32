// Op-table rows for max/min (all and along a dim), argmax/argmin, var and std_, plus the
// tie-breaking rules of their gradients (first index along a dim, even split for the full reduction).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;
using RowFn = std::function<double(const V&)>;

// For each output element (the kept dims in row-major order) the reduced elements in row-major order.
V reduce_ref(const Shape& s, const V& v, const std::vector<int64_t>& dims, const RowFn& f) {
  std::vector<bool> red(s.size(), false);
  for (int64_t d : dims) red[size_t(d)] = true;
  Shape kept, redd;
  for (size_t d = 0; d < s.size(); ++d) (red[d] ? redd : kept).push_back(s[d]);
  Shape st = contiguous_strides(s);
  V out;
  for (int64_t o = 0; o < numel_of(kept); ++o) {
    V row;
    for (int64_t r = 0; r < numel_of(redd); ++r) {
      int64_t off = 0, oo = o, rr = r;
      for (size_t d = s.size(); d-- > 0;) {
        int64_t& src = red[d] ? rr : oo;
        off += (src % s[d]) * st[d];
        src /= s[d];
      }
      row.push_back(v[size_t(off)]);
    }
    out.push_back(f(row));
  }
  return out;
}

double row_max(const V& r) { double m = r[0]; for (double e : r) m = std::max(m, e); return m; }
double row_min(const V& r) { double m = r[0]; for (double e : r) m = std::min(m, e); return m; }
double row_argmax(const V& r) { size_t b = 0; for (size_t i = 1; i < r.size(); ++i) if (r[i] > r[b]) b = i; return double(b); }
double row_argmin(const V& r) { size_t b = 0; for (size_t i = 1; i < r.size(); ++i) if (r[i] < r[b]) b = i; return double(b); }
RowFn row_var(bool unbiased) {
  return [unbiased](const V& r) {
    double m = 0;
    for (double e : r) m += e;
    m /= double(r.size());
    double q = 0;
    for (double e : r) q += (e - m) * (e - m);
    return q / (double(r.size()) - (unbiased ? 1 : 0));
  };
}
V as_f32(V v) {
  for (auto& e : v) e = double(float(e));
  return v;
}

void extreme_rows() {
  struct E {
    const char* name;
    const char* all_op;
    const char* dim_op;
    Tensor (*all)(const Tensor&);
    Tensor (*along)(const Tensor&, int64_t, bool);
    double (*ref)(const V&);
  };
  const E es[] = {{"max", "max_all", "max_dim", [](const Tensor& x) { return max(x); },
                   [](const Tensor& x, int64_t d, bool k) { return max(x, d, k); }, row_max},
                  {"min", "min_all", "min_dim", [](const Tensor& x) { return min(x); },
                   [](const Tensor& x, int64_t d, bool k) { return min(x, d, k); }, row_min}};
  for (const E& e : es) {
    auto all = e.all;
    auto along = e.along;
    auto ref = e.ref;
    std::string n = e.name;
    add_case({.name = n + "/all", .ops = {e.all_op}, .inputs = {{{3, 4}}},
              .fn = [all](const T& x) { return all(x[0]); },
              .reference = [ref](const std::vector<V>& v) { return V{ref(v[0])}; }});
    add_case({.name = n + "/all_strided_f32", .ops = {e.all_op}, .inputs = {{{6, 5}, DType::Float32}},
              .fn = [all](const T& x) { return all(x[0].t()); },
              .reference = [ref](const std::vector<V>& v) { return V{ref(as_f32(v[0]))}; }, .gradcheck = false});
    // Two tied extremes: finite differences give 1/2 to each, which is the even split.
    add_case({.name = n + "/all_ties", .ops = {e.all_op},
              .inputs = {{{2, 3}, DType::Float64, 0, 0, true, {1, 3, -3, 3, -3, 0}}},
              .fn = [all](const T& x) { return all(x[0]); },
              .reference = [ref](const std::vector<V>& v) { return V{ref(v[0])}; }});
    add_case({.name = n + "/all_int64", .ops = {e.all_op}, .inputs = {{{7}, DType::Int64, -50, 50}},
              .fn = [all](const T& x) { return all(x[0]); },
              .reference = [ref](const std::vector<V>& v) { return V{ref(v[0])}; }, .gradcheck = false});
    for (int64_t d : {0, 1, -1}) {
      for (bool keep : {false, true}) {
        add_case({.name = n + "/dim" + std::to_string(d) + (keep ? "_keep" : ""), .ops = {e.dim_op},
                  .inputs = {{{3, 4, 5}}},
                  .fn = [along, d, keep](const T& x) { return along(x[0], d, keep); },
                  .reference = [ref, d](const std::vector<V>& v) {
                    return reduce_ref({3, 4, 5}, v[0], {d < 0 ? d + 3 : d}, ref); }});
      }
    }
    add_case({.name = n + "/dim_f32_strided", .ops = {e.dim_op}, .inputs = {{{5, 6}, DType::Float32}},
              .fn = [along](const T& x) { return along(x[0].t(), 1, false); },
              .reference = [ref](const std::vector<V>& v) { return reduce_ref({5, 6}, as_f32(v[0]), {0}, ref); },
              .gradcheck = false});
    add_case({.name = n + "/dim_0d", .ops = {e.dim_op}, .inputs = {{{}}},
              .fn = [along](const T& x) { return along(x[0], 0, true); },
              .reference = [](const std::vector<V>& v) { return v[0]; }});
  }

  struct A {
    const char* name;
    Tensor (*along)(const Tensor&, int64_t, bool);
    Tensor (*flat)(const Tensor&);
    double (*ref)(const V&);
  };
  const A as[] = {{"argmax", [](const Tensor& x, int64_t d, bool k) { return argmax(x, d, k); },
                   [](const Tensor& x) { return argmax(x); }, row_argmax},
                  {"argmin", [](const Tensor& x, int64_t d, bool k) { return argmin(x, d, k); },
                   [](const Tensor& x) { return argmin(x); }, row_argmin}};
  for (const A& a : as) {
    auto along = a.along;
    auto flat = a.flat;
    auto ref = a.ref;
    std::string n = a.name;
    for (int64_t d : {0, 2}) {
      add_case({.name = n + "/dim" + std::to_string(d), .ops = {a.name}, .inputs = {{{3, 4, 5}}},
                .fn = [along, d](const T& x) { return along(x[0], d, d == 2); },
                .reference = [ref, d](const std::vector<V>& v) { return reduce_ref({3, 4, 5}, v[0], {d}, ref); },
                .gradcheck = false});
    }
    add_case({.name = n + "/flat", .ops = {a.name}, .inputs = {{{3, 4}}},
              .fn = [flat](const T& x) { return flat(x[0]); },
              .reference = [ref](const std::vector<V>& v) { return V{ref(v[0])}; }, .gradcheck = false});
    // Ties: the first extreme wins; int64 with few distinct values, and fixed float ties.
    add_case({.name = n + "/ties_int64", .ops = {a.name}, .inputs = {{{4, 6}, DType::Int64, 0, 3}},
              .fn = [along](const T& x) { return along(x[0], 1, false); },
              .reference = [ref](const std::vector<V>& v) { return reduce_ref({4, 6}, v[0], {1}, ref); },
              .gradcheck = false});
    add_case({.name = n + "/ties_f32", .ops = {a.name},
              .inputs = {{{2, 4}, DType::Float32, 0, 0, false, {1, 5, 5, -2, -2, 0, -2, 5}}},
              .fn = [along](const T& x) { return along(x[0], 1, false); },
              .reference = [ref](const std::vector<V>& v) { return reduce_ref({2, 4}, v[0], {1}, ref); },
              .gradcheck = false});
  }
}

void var_rows() {
  struct Vc {
    std::string name;
    std::vector<int64_t> dims;
    bool unbiased, keepdim;
  };
  for (const Vc& c : {Vc{"all", {}, true, false}, Vc{"dim1", {1}, true, false}, Vc{"dims02_keep", {0, 2}, true, true},
                      Vc{"biased_dim-1", {-1}, false, false}, Vc{"biased_all_keep", {}, false, true}}) {
    std::vector<int64_t> rdims = c.dims.empty() ? std::vector<int64_t>{0, 1, 2} : c.dims;
    for (auto& d : rdims) d = d < 0 ? d + 3 : d;
    std::sort(rdims.begin(), rdims.end());
    add_case({.name = "var/" + c.name, .ops = {"var"}, .inputs = {{{3, 4, 5}}},
              .fn = [c](const T& x) { return var(x[0], c.dims, c.unbiased, c.keepdim); },
              .reference = [rdims, c](const std::vector<V>& v) { return reduce_ref({3, 4, 5}, v[0], rdims, row_var(c.unbiased)); }});
  }
  add_case({.name = "var/f32_strided_offset", .ops = {"var"}, .inputs = {{{6, 5}, DType::Float32, 1000, 1001}},
            .fn = [](const T& x) { return var(x[0].t(), {1}); },
            .reference = [](const std::vector<V>& v) { return reduce_ref({6, 5}, as_f32(v[0]), {0}, row_var(true)); },
            .tol = 1e-5, .gradcheck = false});
  add_case({.name = "std_/dim0", .ops = {"var", "sqrt"}, .inputs = {{{4, 3}}},
            .fn = [](const T& x) { return std_(x[0], {0}); },
            .reference = [](const std::vector<V>& v) {
              V o = reduce_ref({4, 3}, v[0], {0}, row_var(true));
              for (auto& e : o) e = std::sqrt(e);
              return o; }});
  add_case({.name = "std_/f32_all", .ops = {"var", "sqrt"}, .inputs = {{{7, 3}, DType::Float32}},
            .fn = [](const T& x) { return std_(x[0], {}, false); },
            .reference = [](const std::vector<V>& v) { return V{std::sqrt(row_var(false)(as_f32(v[0])))}; },
            .tol = 1e-6, .gradcheck = false});
}

}  // namespace

TERRA_OP_CASES(reduce_stats) {
  extreme_rows();
  var_rows();
}

// Along a dim, the whole gradient goes to the first extreme element (torch's rule).
TEST(ReduceStatsGrad, DimReductionGivesTiesToFirstIndex) {
  Tensor x = tensor_f64({1, 5, 5, 2, -1, -1, 0, -1}, {2, 4}).requires_grad_();
  (max(x, 1) * tensor_f64({1, 10}, {2})).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 0, 0, 0, 10, 0}));
  Tensor y = tensor_f64({1, 5, 5, 2, -1, -1, 0, -1}, {2, 4}).requires_grad_();
  min(y, 1, true).sum().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0}));
}

// Over all elements, tied extremes share the gradient evenly (three ties: 1/3 each).
TEST(ReduceStatsGrad, FullReductionSplitsTiesEvenly) {
  Tensor x = tensor_f64({4, 1, 4, 4, 0, -2}, {2, 3}).requires_grad_();
  (max(x) * 3.0).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 1, 1, 0, 0}));
  Tensor y = tensor_f64({-2, 1, -2, 4, 0, -2}, {2, 3}).requires_grad_();
  min(y).backward();
  auto g = y.grad().to_vector<double>();
  for (size_t i : {0u, 2u, 5u}) EXPECT_NEAR(g[i], 1.0 / 3, 1e-15);
  EXPECT_EQ(g[1] + g[3] + g[4], 0.0);
}

TEST(ReduceStatsGrad, NaNPropagatesAndWinsArgmax) {
  Tensor x = tensor({1.f, NAN, 3.f, 0.f}, {2, 2});
  EXPECT_TRUE(std::isnan(max(x).item<float>()));
  EXPECT_TRUE(std::isnan(min(x).item<float>()));
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);
  EXPECT_TRUE(std::isnan(maximum(x, tensor({0.f}, {1})).to_vector<float>()[1]));
  EXPECT_TRUE(std::isnan(relu(x).to_vector<float>()[1]));
  EXPECT_TRUE(std::isnan(clamp(x, 0.0, 1.0).to_vector<float>()[1]));
}

TEST(ReduceStatsGrad, DTypesAndShapes) {
  Tensor x = arange(12).reshape({3, 4});
  EXPECT_EQ(max(x).dtype(), DType::Int64);
  EXPECT_EQ(max(x).item<int64_t>(), 11);
  EXPECT_EQ(argmax(x, 0).dtype(), DType::Int64);
  EXPECT_EQ(max(x, 1, true).shape(), (Shape{3, 1}));
  EXPECT_EQ(argmin(x, 0, true).shape(), (Shape{1, 4}));
  EXPECT_EQ(var(ones({2, 3}), {1}, true, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(var(ones({2, 3})).shape(), (Shape{}));
  // One element, unbiased: 0/0 = NaN, as torch.
  EXPECT_TRUE(std::isnan(var(ones({1})).item<float>()));
}

}  // namespace terra::testing
