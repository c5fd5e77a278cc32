// Op-table rows for elementwise math, comparisons, selection and activations.
// References are plain <cmath> on doubles; float32 rows round the inputs to float first.
#include <cmath>
#include <optional>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;
using Unary = std::function<double(double)>;
using Binary = std::function<double(double, double)>;

// Element index of `s` (right-aligned against `so`) for flat index `flat` of `so`.
int64_t bcast_index(const Shape& so, const Shape& s, int64_t flat) {
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
}

V map2(const Shape& sa, const V& a, const Shape& sb, const V& b, Binary f) {
  Shape so = broadcast_shapes("ref", sa, sb);
  V out(size_t(numel_of(so)));
  for (int64_t i = 0; i < int64_t(out.size()); ++i)
    out[size_t(i)] = f(a[size_t(bcast_index(so, sa, i))], b[size_t(bcast_index(so, sb, i))]);
  return out;
}
V map1(const V& a, Unary f) {
  V o(a.size());
  for (size_t i = 0; i < a.size(); ++i) o[i] = f(a[i]);
  return o;
}
V as_f32(V v) {
  for (auto& e : v) e = double(float(e));
  return v;
}
// Row-major values of the transpose of a [r, c] matrix.
V transposed(const V& v, int64_t r, int64_t c) {
  V o;
  for (int64_t j = 0; j < c; ++j)
    for (int64_t i = 0; i < r; ++i) o.push_back(v[size_t(i * c + j)]);
  return o;
}

// float64 row with gradcheck, float32 row, non-contiguous (transposed) row.
void unary_rows(const std::string& name, std::vector<std::string> ops, std::function<Tensor(const Tensor&)> op,
                Unary ref, double lo, double hi, bool grad = true, double tol32 = 2e-6) {
  add_case({.name = name + "/f64", .ops = ops, .inputs = {{{3, 4}, DType::Float64, lo, hi}},
            .fn = [op](const T& x) { return op(x[0]); },
            .reference = [ref](const std::vector<V>& v) { return map1(v[0], ref); },
            .tol = 1e-12, .gradcheck = grad});
  add_case({.name = name + "/f32", .ops = ops, .inputs = {{{5, 7}, DType::Float32, lo, hi}},
            .fn = [op](const T& x) { return op(x[0]); },
            .reference = [ref](const std::vector<V>& v) { return map1(as_f32(v[0]), ref); },
            .tol = tol32, .gradcheck = false});
  add_case({.name = name + "/strided", .ops = ops, .inputs = {{{4, 3}, DType::Float64, lo, hi}},
            .fn = [op](const T& x) { return op(x[0].t()); },
            .reference = [ref](const std::vector<V>& v) { return map1(transposed(v[0], 4, 3), ref); },
            .tol = 1e-12, .gradcheck = grad});
}

// Broadcasting float64 rows with gradcheck plus a float32 row.
void binary_rows(const std::string& name, std::vector<std::string> ops,
                 std::function<Tensor(const Tensor&, const Tensor&)> op, Binary ref, double lo, double hi,
                 double lo_b, double hi_b, bool grad = true, DType d64 = DType::Float64) {
  struct S {
    Shape a, b;
  };
  for (auto [sa, sb] : {S{{3, 4}, {3, 4}}, S{{2, 3, 4}, {4}}, S{{3, 1}, {1, 5}}, S{{}, {2, 3}}}) {
    add_case({.name = name + "/" + shape_str(sa) + shape_str(sb), .ops = ops,
              .inputs = {{sa, d64, lo, hi}, {sb, d64, lo_b, hi_b}},
              .fn = [op](const T& x) { return op(x[0], x[1]); },
              .reference = [sa, sb, ref](const std::vector<V>& v) { return map2(sa, v[0], sb, v[1], ref); },
              .tol = 1e-12, .gradcheck = grad});
  }
  Shape sa{4, 5}, sb{5};
  add_case({.name = name + "/f32", .ops = ops, .inputs = {{sa, DType::Float32, lo, hi}, {sb, DType::Float32, lo_b, hi_b}},
            .fn = [op](const T& x) { return op(x[0], x[1]); },
            .reference = [sa, sb, ref](const std::vector<V>& v) { return map2(sa, as_f32(v[0]), sb, as_f32(v[1]), ref); },
            .tol = 2e-6, .gradcheck = false});
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
// Derivatives by a high-order central difference of the references (independent of the kernels' formulas).
double deriv(double (*f)(double), double x) {
  const double h = 1e-3;
  return (-f(x + 2 * h) + 8 * f(x + h) - 8 * f(x - h) + f(x - 2 * h)) / (12 * h);
}

void math_rows() {
  binary_rows("pow", {"pow"}, [](const Tensor& a, const Tensor& b) { return pow(a, b); },
              [](double a, double b) { return std::pow(a, b); }, 0.5, 2.0, -2.0, 2.0);
  for (double e : {2.5, 2.0, 0.5, -1.0, 3.0, 1.0, 0.0, -0.5}) {
    std::string n = "pow_scalar/" + std::to_string(e);
    unary_rows(n, {"pow_scalar"}, [e](const Tensor& x) { return pow(x, e); },
               [e](double x) { return std::pow(x, e); }, 0.5, 2.0);
  }
  unary_rows("sqrt", {"sqrt"}, [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.5, 3);
  unary_rows("rsqrt", {"rsqrt"}, [](const Tensor& x) { return rsqrt(x); },
             [](double x) { return 1 / std::sqrt(x); }, 0.5, 3);
  unary_rows("exp", {"exp"}, [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -2, 2);
  unary_rows("log", {"log"}, [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 0.5, 3);
  unary_rows("abs", {"abs"}, [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, -2, 2);
  unary_rows("sign", {"sign"}, [](const Tensor& x) { return sign(x); },
             [](double x) { return double((0 < x) - (x < 0)); }, -2, 2);
  unary_rows("clamp/both", {"clamp"}, [](const Tensor& x) { return clamp(x, -0.5, 0.7); },
             [](double x) { return std::min(std::max(x, -0.5), 0.7); }, -2, 2);
  unary_rows("clamp/min", {"clamp"}, [](const Tensor& x) { return clamp(x, -0.5, std::nullopt); },
             [](double x) { return std::max(x, -0.5); }, -2, 2);
  unary_rows("clamp/max", {"clamp"}, [](const Tensor& x) { return clamp(x, std::nullopt, 0.7); },
             [](double x) { return std::min(x, 0.7); }, -2, 2);
  add_case({.name = "clamp/int64", .ops = {"clamp", "abs", "sign"}, .inputs = {{{2, 5}, DType::Int64, -5, 5}},
            .fn = [](const T& x) { return clamp(x[0], -2.0, 3.0) + abs(x[0]) * 10.0 + sign(x[0]) * 100.0; },
            .reference = [](const std::vector<V>& v) {
              return map1(v[0], [](double x) {
                return std::min(std::max(x, -2.0), 3.0) + 10 * std::fabs(x) + 100 * double((0 < x) - (x < 0)); }); },
            .gradcheck = false});
  add_case({.name = "exp/int64_promotes", .ops = {"exp", "cast"}, .inputs = {{{2, 3}, DType::Int64, -3, 3}},
            .fn = [](const T& x) { return exp(x[0]).to(DType::Float64); },
            .reference = [](const std::vector<V>& v) { return map1(v[0], [](double x) { return double(std::exp(float(x))); }); },
            .tol = 1e-6, .gradcheck = false});

  binary_rows("maximum", {"maximum"}, [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
              [](double a, double b) { return std::max(a, b); }, -2, 2, -2, 2);
  binary_rows("minimum", {"minimum"}, [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
              [](double a, double b) { return std::min(a, b); }, -2, 2, -2, 2);
  // Ties: finite differences see half the slope on each side, which is torch's split.
  for (bool is_max : {true, false}) {
    add_case({.name = is_max ? "maximum/ties" : "minimum/ties", .ops = {is_max ? "maximum" : "minimum"},
              .inputs = {{{2, 3}, DType::Float64, 0, 0, true, {1, 2, 3, -1, 0.5, 7}},
                         {{2, 3}, DType::Float64, 0, 0, true, {1, 0, 3, -1, 0.9, 6}}},
              .fn = [is_max](const T& x) { return is_max ? maximum(x[0], x[1]) : minimum(x[0], x[1]); },
              .reference = [is_max](const std::vector<V>& v) {
                V o;
                for (size_t i = 0; i < 6; ++i) o.push_back(is_max ? std::max(v[0][i], v[1][i]) : std::min(v[0][i], v[1][i]));
                return o; }});
  }
  add_case({.name = "maximum/int64_float_promote", .ops = {"maximum", "cast"},
            .inputs = {{{3}, DType::Int64, 0, 0, false, {1, -4, 2}}, {{3}, DType::Float64, 0, 0, true, {0.5, -3.5, 2.5}}},
            .fn = [](const T& x) { return maximum(x[0], x[1]); },
            .reference = [](const std::vector<V>&) { return V{1, -3.5, 2.5}; }});
}

void compare_rows() {
  struct C {
    const char* name;
    Tensor (*tt)(const Tensor&, const Tensor&);
    Tensor (*td)(const Tensor&, double);
    double (*ref)(double, double);
  };
  const C cs[] = {
      {"eq", [](const Tensor& a, const Tensor& b) { return a == b; }, [](const Tensor& a, double b) { return eq(a, b); },
       [](double a, double b) { return double(a == b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return a != b; }, [](const Tensor& a, double b) { return ne(a, b); },
       [](double a, double b) { return double(a != b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return a < b; }, [](const Tensor& a, double b) { return lt(a, b); },
       [](double a, double b) { return double(a < b); }},
      {"le", [](const Tensor& a, const Tensor& b) { return a <= b; }, [](const Tensor& a, double b) { return le(a, b); },
       [](double a, double b) { return double(a <= b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return a > b; }, [](const Tensor& a, double b) { return gt(a, b); },
       [](double a, double b) { return double(a > b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return a >= b; }, [](const Tensor& a, double b) { return ge(a, b); },
       [](double a, double b) { return double(a >= b); }},
  };
  for (const C& c : cs) {
    auto tt = c.tt;
    auto td = c.td;
    auto ref = c.ref;
    // int64 inputs in a small range so ties (equal elements) occur
    binary_rows(c.name, {c.name}, tt, ref, -3, 3, -3, 3, false, DType::Int64);
    binary_rows(std::string(c.name) + "/float", {c.name}, tt, ref, -2, 2, -2, 2, false);
    add_case({.name = std::string(c.name) + "/scalar", .ops = {c.name}, .inputs = {{{3, 4}, DType::Int64, -3, 3}},
              .fn = [td](const T& x) { return td(x[0], 1.0); },
              .reference = [ref](const std::vector<V>& v) { return map1(v[0], [ref](double e) { return ref(e, 1.0); }); },
              .gradcheck = false});
    add_case({.name = std::string(c.name) + "/scalar_f32", .ops = {c.name}, .inputs = {{{3, 4}, DType::Float32, -2, 2}},
              .fn = [c](const T& x) {
                // operator forms with a double on the right
                std::string n = c.name;
                if (n == "eq") return x[0] == 0.25;
                if (n == "ne") return x[0] != 0.25;
                if (n == "lt") return x[0] < 0.25;
                if (n == "le") return x[0] <= 0.25;
                if (n == "gt") return x[0] > 0.25;
                return x[0] >= 0.25; },
              .reference = [ref](const std::vector<V>& v) {
                V o; for (double e : as_f32(v[0])) o.push_back(ref(e, double(0.25f))); return o; },
              .gradcheck = false});
  }
  add_case({.name = "eq/fractional_scalar_on_int", .ops = {"eq", "lt"},
            .inputs = {{{4}, DType::Int64, 0, 0, false, {0, 1, 2, 3}}},
            .fn = [](const T& x) { return logical_or(eq(x[0], 1.5), lt(x[0], 1.5)); },
            .reference = [](const std::vector<V>& v) { return map1(v[0], [](double x) { return double(x < 1.5); }); },
            .gradcheck = false});
  add_case({.name = "logical_not", .ops = {"logical_not"}, .inputs = {{{3, 4}, DType::Bool, 0, 1}},
            .fn = [](const T& x) { return logical_not(x[0]); },
            .reference = [](const std::vector<V>& v) { return map1(v[0], [](double a) { return double(a == 0); }); },
            .gradcheck = false});
  add_case({.name = "logical_not/float", .ops = {"logical_not"}, .inputs = {{{5}, DType::Float32, 0, 0, false, {0, 1.5, -2, 0, 3}}},
            .fn = [](const T& x) { return logical_not(x[0]); },
            .reference = [](const std::vector<V>&) { return V{1, 0, 0, 1, 0}; }, .gradcheck = false});
  add_case({.name = "logical_and_or", .ops = {"logical_and", "logical_or", "cast"},
            .inputs = {{{3, 4}, DType::Bool, 0, 1}, {{4}, DType::Int64, -1, 2}},
            .fn = [](const T& x) { return logical_and(x[0], x[1]).to(DType::Int64) * int64_t(2) + logical_or(x[0], x[1]).to(DType::Int64); },
            .reference = [](const std::vector<V>& v) {
              return map2({3, 4}, v[0], {4}, v[1], [](double a, double b) {
                return 2.0 * double(a != 0 && b != 0) + double(a != 0 || b != 0); }); },
            .gradcheck = false});
}

void select_rows() {
  auto where_ref = [](const Shape& sc, const V& c, const Shape& sa, const V& a, const Shape& sb, const V& b) {
    Shape so = broadcast_shapes("ref", broadcast_shapes("ref", sc, sa), sb);
    V o;
    for (int64_t i = 0; i < numel_of(so); ++i)
      o.push_back(c[size_t(bcast_index(so, sc, i))] != 0 ? a[size_t(bcast_index(so, sa, i))]
                                                           : b[size_t(bcast_index(so, sb, i))]);
    return o;
  };
  add_case({.name = "where/broadcast3", .ops = {"where"},
            .inputs = {{{3, 1}, DType::Bool, 0, 1}, {{3, 4}}, {{4}}},
            .fn = [](const T& x) { return where(x[0], x[1], x[2]); },
            .reference = [where_ref](const std::vector<V>& v) { return where_ref({3, 1}, v[0], {3, 4}, v[1], {4}, v[2]); }});
  add_case({.name = "where/dense", .ops = {"where"},
            .inputs = {{{2, 5}, DType::Bool, 0, 1}, {{2, 5}}, {{2, 5}}},
            .fn = [](const T& x) { return where(x[0], x[1], x[2]); },
            .reference = [where_ref](const std::vector<V>& v) { return where_ref({2, 5}, v[0], {2, 5}, v[1], {2, 5}, v[2]); }});
  add_case({.name = "where/scalars", .ops = {"where"},
            .inputs = {{{2, 5}, DType::Bool, 0, 1}, {{2, 5}}},
            .fn = [](const T& x) { return where(x[0], x[1], -1.5) + where(x[0], 2.0, x[1]); },
            .reference = [](const std::vector<V>& v) {
              V o; for (size_t i = 0; i < 10; ++i) o.push_back(v[0][i] != 0 ? v[1][i] + 2.0 : -1.5 + v[1][i]); return o; }});
  add_case({.name = "where/strided", .ops = {"where"},
            .inputs = {{{4, 3}, DType::Bool, 0, 1}, {{4, 3}}, {{3, 4}}},
            .fn = [](const T& x) { return where(x[0].t(), x[1].t(), x[2]); },
            .reference = [where_ref](const std::vector<V>& v) {
              return where_ref({3, 4}, transposed(v[0], 4, 3), {3, 4}, transposed(v[1], 4, 3), {3, 4}, v[2]); }});
  add_case({.name = "where/f32_int_promote", .ops = {"where", "cast"},
            .inputs = {{{6}, DType::Bool, 0, 1}, {{6}, DType::Float32}, {{6}, DType::Int64, -5, 5}},
            .fn = [](const T& x) { return where(x[0], x[1], x[2]); },
            .reference = [where_ref](const std::vector<V>& v) { return where_ref({6}, v[0], {6}, as_f32(v[1]), {6}, v[2]); },
            .tol = 1e-7, .gradcheck = false});
  add_case({.name = "masked_fill", .ops = {"masked_fill"},
            .inputs = {{{3, 4}}, {{4}, DType::Bool, 0, 1}},
            .fn = [](const T& x) { return masked_fill(x[0], x[1], 5.0); },
            .reference = [](const std::vector<V>& v) {
              return map2({3, 4}, v[0], {4}, v[1], [](double a, double m) { return m != 0 ? 5.0 : a; }); }});
  add_case({.name = "masked_fill/f32_large", .ops = {"masked_fill"},
            .inputs = {{{2, 3, 4}, DType::Float32}, {{3, 1}, DType::Bool, 0, 1}},
            .fn = [](const T& x) { return masked_fill(x[0], x[1], -1e30); },
            .reference = [](const std::vector<V>& v) {
              return map2({2, 3, 4}, as_f32(v[0]), {3, 1}, v[1], [](double a, double m) { return m != 0 ? double(float(-1e30)) : a; }); },
            .gradcheck = false});
}

void activation_rows() {
  unary_rows("relu", {"relu"}, [](const Tensor& x) { return relu(x); }, [](double x) { return std::max(x, 0.0); }, -2, 2);
  unary_rows("leaky_relu", {"leaky_relu"}, [](const Tensor& x) { return leaky_relu(x, 0.1); },
             [](double x) { return x > 0 ? x : 0.1 * x; }, -2, 2);
  unary_rows("leaky_relu/default", {"leaky_relu"}, [](const Tensor& x) { return leaky_relu(x); },
             [](double x) { return x > 0 ? x : 0.01 * x; }, -2, 2);
  unary_rows("gelu", {"gelu", "gelu_backward"}, [](const Tensor& x) { return gelu(x); }, gelu_ref, -3, 3);
  unary_rows("gelu/tanh", {"gelu", "gelu_backward"}, [](const Tensor& x) { return gelu(x, true); }, gelu_tanh_ref, -3, 3);
  // gelu_backward directly: its forward is gelu' (checked against a difference quotient of the
  // reference) and its gradcheck is gelu's double backward.
  for (bool tanh_form : {false, true}) {
    add_case({.name = tanh_form ? "gelu_backward/tanh" : "gelu_backward", .ops = {"gelu_backward"},
              .inputs = {{{3, 4}}, {{3, 4}, DType::Float64, -3, 3}},
              .fn = [tanh_form](const T& x) { return gelu_backward(x[0], x[1], tanh_form); },
              .reference = [tanh_form](const std::vector<V>& v) {
                V o;
                for (size_t i = 0; i < v[0].size(); ++i)
                  o.push_back(v[0][i] * deriv(tanh_form ? gelu_tanh_ref : gelu_ref, v[1][i]));
                return o; },
              .tol = 1e-9});
    add_case({.name = tanh_form ? "gelu_backward/tanh_f32" : "gelu_backward/f32", .ops = {"gelu_backward"},
              .inputs = {{{4, 5}, DType::Float32}, {{4, 5}, DType::Float32, -3, 3}},
              .fn = [tanh_form](const T& x) { return gelu_backward(x[0], x[1], tanh_form); },
              .reference = [tanh_form](const std::vector<V>& v) {
                V g = as_f32(v[0]), a = as_f32(v[1]), o;
                for (size_t i = 0; i < g.size(); ++i) o.push_back(g[i] * deriv(tanh_form ? gelu_tanh_ref : gelu_ref, a[i]));
                return o; },
              .tol = 2e-6, .gradcheck = false});
  }
  unary_rows("sigmoid", {"sigmoid"}, [](const Tensor& x) { return sigmoid(x); },
             [](double x) { return 1 / (1 + std::exp(-x)); }, -4, 4);
  unary_rows("tanh", {"tanh"}, [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -3, 3);
  unary_rows("softplus", {"softplus", "sigmoid"}, [](const Tensor& x) { return softplus(x); },
             [](double x) { return std::log1p(std::exp(x)); }, -4, 4);
  // beta 2, threshold 1: both branches (linear above beta*x = 1).
  unary_rows("softplus/beta2_th1", {"softplus", "sigmoid"}, [](const Tensor& x) { return softplus(x, 2.0, 1.0); },
             [](double x) { return 2 * x > 1 ? x : std::log1p(std::exp(2 * x)) / 2; }, -2, 2);
  // Extremes saturate without NaN.
  add_case({.name = "sigmoid_tanh_softplus/extremes", .ops = {"sigmoid", "tanh", "softplus"},
            .inputs = {{{4}, DType::Float32, 0, 0, false, {-200, -30, 30, 200}}},
            .fn = [](const T& x) { return sigmoid(x[0]) + tanh(x[0]) * 2.0 + softplus(x[0]) * 4.0; },
            .reference = [](const std::vector<V>& v) {
              return map1(v[0], [](double x) { return 1 / (1 + std::exp(-x)) + 2 * std::tanh(x) + 4 * (x > 20 ? x : std::log1p(std::exp(x))); }); },
            .tol = 1e-6, .gradcheck = false});
  // Large inputs take the parallel path (above cpu::kGrain elements).
  add_case({.name = "relu_exp/large_f32", .ops = {"relu", "exp"}, .inputs = {{{200, 300}, DType::Float32, -2, 2}},
            .fn = [](const T& x) { return relu(x[0]) + exp(x[0]); },
            .reference = [](const std::vector<V>& v) {
              return map1(as_f32(v[0]), [](double x) { return std::max(x, 0.0) + std::exp(x); }); },
            .tol = 2e-6, .gradcheck = false});
  add_case({.name = "relu/int64", .ops = {"relu"}, .inputs = {{{6}, DType::Int64, -5, 5}},
            .fn = [](const T& x) { return relu(x[0]); },
            .reference = [](const std::vector<V>& v) { return map1(v[0], [](double x) { return std::max(x, 0.0); }); },
            .gradcheck = false});
}

}  // namespace

TERRA_OP_CASES(elementwise) {
  math_rows();
  compare_rows();
  select_rows();
  activation_rows();
}

}  // namespace terra::testing
