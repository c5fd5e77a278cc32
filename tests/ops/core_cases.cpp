// Op-table rows for the core ops: arithmetic, views, copies, sum, matmul, factories.
#include <cmath>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;

// Reference for a broadcasting binary op on row-major values.
V broadcast2(const Shape& sa, const V& a, const Shape& sb, const V& b, double (*f)(double, double)) {
  Shape so = broadcast_shapes("ref", sa, sb);
  int64_t n = numel_of(so);
  V out(static_cast<size_t>(n));
  auto index_of = [&](const Shape& s, int64_t flat) {
    int64_t idx = 0, mul = 1;
    for (int64_t d = int64_t(so.size()) - 1, e = int64_t(s.size()) - 1; d >= 0; --d, --e) {
      int64_t coord = flat % so[size_t(d)];
      flat /= so[size_t(d)];
      if (e >= 0) {
        if (s[size_t(e)] != 1) idx += coord * mul;
        mul *= s[size_t(e)];
      }
    }
    return idx;
  };
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = f(a[size_t(index_of(sa, i))], b[size_t(index_of(sb, i))]);
  return out;
}

void binary_rows(const char* name, double (*f)(double, double), Tensor (*op)(const Tensor&, const Tensor&),
                 double lo = -2, double hi = 2) {
  struct S {
    Shape a, b;
  };
  for (auto [sa, sb] : {S{{3, 4}, {3, 4}}, S{{2, 3, 4}, {4}}, S{{3, 1}, {1, 5}}, S{{}, {2, 3}}}) {
    add_case({.name = std::string(name) + "/" + shape_str(sa) + shape_str(sb),
              .ops = {name},
              .inputs = {{sa, DType::Float64, lo, hi}, {sb, DType::Float64, lo, hi}},
              .fn = [op](const T& x) { return op(x[0], x[1]); },
              .reference = [sa, sb, f](const std::vector<V>& v) { return broadcast2(sa, v[0], sb, v[1], f); }});
  }
}

Tensor add_f(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor sub_f(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor mul_f(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor div_f(const Tensor& a, const Tensor& b) { return div(a, b); }

// Reference matmul of [..., m, k] x [..., k, n] with equal batch dims.
V matmul_ref(int64_t batch, int64_t m, int64_t k, int64_t n, const V& a, const V& b) {
  V out(size_t(batch * m * n), 0.0);
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a[size_t(z * m * k + i * k + p)] * b[size_t(z * k * n + p * n + j)];
        out[size_t(z * m * n + i * n + j)] = s;
      }
  return out;
}

}  // namespace

TERRA_OP_CASES(core) {
  binary_rows("add", [](double a, double b) { return a + b; }, add_f);
  binary_rows("sub", [](double a, double b) { return a - b; }, sub_f);
  binary_rows("mul", [](double a, double b) { return a * b; }, mul_f);
  binary_rows("div", [](double a, double b) { return a / b; }, div_f, 0.5, 2.0);
  add_case({.name = "neg", .ops = {"neg"}, .inputs = {{{2, 3}}},
            .fn = [](const T& x) { return -x[0]; },
            .reference = [](const std::vector<V>& v) { V o = v[0]; for (auto& e : o) e = -e; return o; }});

  // In-place forms, on a clone so the leaf is untouched.
  add_case({.name = "add_", .ops = {"add_", "copy"}, .inputs = {{{3, 4}}, {{4}}},
            .fn = [](const T& x) { Tensor c = x[0].clone(); c.add_(x[1]); return c; },
            .reference = [](const std::vector<V>& v) {
              return broadcast2({3, 4}, v[0], {4}, v[1], [](double a, double b) { return a + b; }); }});
  add_case({.name = "sub_", .ops = {"sub_"}, .inputs = {{{3, 4}}, {{3, 4}}},
            .fn = [](const T& x) { Tensor c = x[0].clone(); c.sub_(x[1]); return c; },
            .reference = [](const std::vector<V>& v) {
              V o = v[0]; for (size_t i = 0; i < o.size(); ++i) o[i] -= v[1][i]; return o; }});
  add_case({.name = "mul_", .ops = {"mul_", "div_"}, .inputs = {{{3, 4}}, {{3, 4}, DType::Float64, 0.5, 2}},
            .fn = [](const T& x) { NoGradGuard g; Tensor c = x[0].clone(); c.mul_(x[1]); c.div_(x[1] * x[1]); return c; },
            .reference = [](const std::vector<V>& v) {
              V o = v[0]; for (size_t i = 0; i < o.size(); ++i) o[i] /= v[1][i]; return o; },
            .tol = 1e-12, .gradcheck = false});
  add_case({.name = "copy_", .ops = {"copy_", "full"}, .inputs = {{{2, 3}}},
            .fn = [](const T& x) { Tensor z = zeros({2, 3}, DType::Float64); z.copy_(x[0] * 2.0); return z; },
            .reference = [](const std::vector<V>& v) { V o = v[0]; for (auto& e : o) e *= 2; return o; }});
  add_case({.name = "fill_", .ops = {"fill_"}, .inputs = {{{2, 3}}},
            .fn = [](const T& x) { Tensor z = zeros({2, 3}, DType::Float64); z.slice(1, 0, 2).fill_(7.0); return z + x[0]; },
            .reference = [](const std::vector<V>& v) {
              V o = v[0]; for (int r = 0; r < 2; ++r) { o[size_t(r * 3)] += 7; o[size_t(r * 3 + 1)] += 7; } return o; }});

  // Views and copies.
  add_case({.name = "view+permute", .ops = {"view", "permute"}, .inputs = {{{2, 3, 4}}},
            .fn = [](const T& x) { return x[0].permute({2, 0, 1}).reshape({4, 6}); },
            .reference = [](const std::vector<V>& v) {
              V o; for (int k = 0; k < 4; ++k) for (int i = 0; i < 2; ++i) for (int j = 0; j < 3; ++j)
                o.push_back(v[0][size_t(i * 12 + j * 4 + k)]);
              return o; }});
  add_case({.name = "slice/step2", .ops = {"slice", "slice_backward"}, .inputs = {{{5, 4}}},
            .fn = [](const T& x) { return x[0].slice(0, 1, 5, 2).slice(1, -3, 4); },
            .reference = [](const std::vector<V>& v) {
              V o; for (int i : {1, 3}) for (int j = 1; j < 4; ++j) o.push_back(v[0][size_t(i * 4 + j)]); return o; }});
  add_case({.name = "expand", .ops = {"expand", "sum"}, .inputs = {{{3, 1}}},
            .fn = [](const T& x) { return x[0].expand({2, 3, 4}) * 1.0; },
            .reference = [](const std::vector<V>& v) {
              V o; for (int z = 0; z < 2; ++z) for (int i = 0; i < 3; ++i) for (int j = 0; j < 4; ++j) o.push_back(v[0][size_t(i)]);
              return o; }});
  add_case({.name = "contiguous", .ops = {"copy"}, .inputs = {{{3, 4}}},
            .fn = [](const T& x) { return x[0].t().contiguous(); },
            .reference = [](const std::vector<V>& v) {
              V o; for (int j = 0; j < 4; ++j) for (int i = 0; i < 3; ++i) o.push_back(v[0][size_t(i * 4 + j)]); return o; }});
  add_case({.name = "cast", .ops = {"cast"}, .inputs = {{{2, 3}}},
            .fn = [](const T& x) { return x[0].to(DType::Float32).to(DType::Float64); },
            .reference = [](const std::vector<V>& v) { V o = v[0]; for (auto& e : o) e = double(float(e)); return o; },
            .tol = 1e-12, .eps = 1e-3, .grad_tol = 1e-3});  // finite differences see float32 rounding
  add_case({.name = "sum/dims", .ops = {"sum"}, .inputs = {{{2, 3, 4}}},
            .fn = [](const T& x) { return x[0].sum({0, 2}); },
            .reference = [](const std::vector<V>& v) {
              V o(3, 0.0); for (int i = 0; i < 2; ++i) for (int j = 0; j < 3; ++j) for (int k = 0; k < 4; ++k)
                o[size_t(j)] += v[0][size_t(i * 12 + j * 4 + k)];
              return o; }});
  add_case({.name = "mean/keepdim", .ops = {"sum", "div"}, .inputs = {{{2, 3}}},
            .fn = [](const T& x) { return x[0].mean({1}, true); },
            .reference = [](const std::vector<V>& v) {
              return V{(v[0][0] + v[0][1] + v[0][2]) / 3, (v[0][3] + v[0][4] + v[0][5]) / 3}; }});
  add_case({.name = "matmul/2d", .ops = {"matmul"}, .inputs = {{{3, 4}}, {{4, 5}}},
            .fn = [](const T& x) { return matmul(x[0], x[1]); },
            .reference = [](const std::vector<V>& v) { return matmul_ref(1, 3, 4, 5, v[0], v[1]); }});
  add_case({.name = "matmul/batched_transposed", .ops = {"matmul"}, .inputs = {{{2, 3, 4}}, {{2, 5, 4}}},
            .fn = [](const T& x) { return matmul(x[0], x[1].transpose(1, 2)); },
            .reference = [](const std::vector<V>& v) {
              V bt; for (int z = 0; z < 2; ++z) for (int p = 0; p < 4; ++p) for (int j = 0; j < 5; ++j)
                bt.push_back(v[1][size_t(z * 20 + j * 4 + p)]);
              return matmul_ref(2, 3, 4, 5, v[0], bt); }});
  add_case({.name = "matmul/broadcast_vec", .ops = {"matmul"}, .inputs = {{{2, 3, 4}}, {{4}}},
            .fn = [](const T& x) { return matmul(x[0], x[1]); },
            .reference = [](const std::vector<V>& v) { V b = v[1]; return matmul_ref(1, 6, 4, 1, v[0], b); }});
  add_case({.name = "matmul/f32", .ops = {"matmul"}, .inputs = {{{8, 16}, DType::Float32}, {{16, 8}, DType::Float32}},
            .fn = [](const T& x) { return matmul(x[0], x[1]); },
            .reference = [](const std::vector<V>& v) {
              V a(v[0].begin(), v[0].end()), b(v[1].begin(), v[1].end());
              for (auto& e : a) e = double(float(e));
              for (auto& e : b) e = double(float(e));
              return matmul_ref(1, 8, 16, 8, a, b); },
            .tol = 1e-5, .gradcheck = false});
  // Strides that fit no sgemm layout (step 2 along the last dim): the kernel copies the operand.
  add_case({.name = "matmul/f32_strided", .ops = {"matmul"},
            .inputs = {{{2, 3, 8}, DType::Float32}, {{2, 4, 5}, DType::Float32}},
            .fn = [](const T& x) { return matmul(x[0].slice(-1, 0, 8, 2), x[1]); },
            .reference = [](const std::vector<V>& v) {
              V a, b(v[1].begin(), v[1].end());
              for (int z = 0; z < 2; ++z) for (int i = 0; i < 3; ++i) for (int p = 0; p < 4; ++p)
                a.push_back(double(float(v[0][size_t(z * 24 + i * 8 + 2 * p)])));
              for (auto& e : b) e = double(float(e));
              return matmul_ref(2, 3, 4, 5, a, b); },
            .tol = 1e-5, .gradcheck = false});
  add_case({.name = "arange", .ops = {"arange"}, .inputs = {},
            .fn = [](const T&) { return arange(2, 11, 3, DType::Float64); },
            .reference = [](const std::vector<V>&) { return V{2, 5, 8}; }, .gradcheck = false});
}

}  // namespace terra::testing
