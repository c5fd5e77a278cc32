// opsA: elementwise math, comparisons, selection, activations (elementwise.h) and extremes and
// statistics (reduce_stats.h).
#include "binding.h"

namespace terra::python {

void bind_elementwise(py::module_& m) {
  auto cls = tensor_class(m);
  using T = const Tensor&;

  // math
  m.def("pow", [](T a, T b) { return pow(a, b); }, py::arg("input"), py::arg("exponent"));
  m.def("pow", [](T a, double b) { return pow(a, b); }, py::arg("input"), py::arg("exponent"));
  m.def("pow", [](double a, T b) { return pow(scalar_like(b, a), b); }, py::arg("input"), py::arg("exponent"));
  cls.def("pow", [](T a, T b) { return pow(a, b); }, py::arg("exponent"));
  cls.def("pow", [](T a, double b) { return pow(a, b); }, py::arg("exponent"));
  cls.def("__pow__", [](T a, T b) { return pow(a, b); }, py::is_operator());
  cls.def("__pow__", [](T a, double b) { return pow(a, b); }, py::is_operator());
  cls.def("__rpow__", [](T a, double b) { return pow(scalar_like(a, b), a); }, py::is_operator());
  expose(m, "pow");
  TERRA_PY_BOTH(m, cls, "sqrt", [](T x) { return sqrt(x); });
  TERRA_PY_BOTH(m, cls, "rsqrt", [](T x) { return rsqrt(x); });
  TERRA_PY_BOTH(m, cls, "exp", [](T x) { return exp(x); });
  TERRA_PY_BOTH(m, cls, "log", [](T x) { return log(x); });
  TERRA_PY_BOTH(m, cls, "abs", [](T x) { return abs(x); });
  cls.def("__abs__", [](T x) { return abs(x); });
  TERRA_PY_BOTH(m, cls, "sign", [](T x) { return sign(x); });
  TERRA_PY_BOTH(m, cls, "clamp", [](T x, std::optional<double> lo, std::optional<double> hi) {
    return clamp(x, lo, hi);
  }, py::arg("min") = py::none(), py::arg("max") = py::none());
  TERRA_PY_BOTH(m, cls, "maximum", [](T a, T b) { return maximum(a, b); }, py::arg("other"));
  TERRA_PY_BOTH(m, cls, "minimum", [](T a, T b) { return minimum(a, b); }, py::arg("other"));

  // comparisons (bool results)
#define TERRA_PY_CMP(name, op, dunder, rdunder)                                                   \
  m.def(name, [](T a, T b) { return op(a, b); }, py::arg("input"), py::arg("other"));             \
  m.def(name, [](T a, double b) { return op(a, b); }, py::arg("input"), py::arg("other"));        \
  cls.def(name, [](T a, T b) { return op(a, b); }, py::arg("other"));                             \
  cls.def(name, [](T a, double b) { return op(a, b); }, py::arg("other"));                        \
  cls.def(dunder, [](T a, T b) { return op(a, b); }, py::is_operator());                          \
  cls.def(dunder, [](T a, double b) { return op(a, b); }, py::is_operator());                     \
  expose(m, name);
  TERRA_PY_CMP("eq", eq, "__eq__", "__eq__")
  TERRA_PY_CMP("ne", ne, "__ne__", "__ne__")
  TERRA_PY_CMP("lt", lt, "__lt__", "__gt__")
  TERRA_PY_CMP("le", le, "__le__", "__ge__")
  TERRA_PY_CMP("gt", gt, "__gt__", "__lt__")
  TERRA_PY_CMP("ge", ge, "__ge__", "__le__")
#undef TERRA_PY_CMP
  TERRA_PY_BOTH(m, cls, "logical_not", [](T x) { return logical_not(x); });
  TERRA_PY_BOTH(m, cls, "logical_and", [](T a, T b) { return logical_and(a, b); }, py::arg("other"));
  TERRA_PY_BOTH(m, cls, "logical_or", [](T a, T b) { return logical_or(a, b); }, py::arg("other"));
  cls.def("__invert__", [](T x) {
    if (x.dtype() != DType::Bool) throw std::invalid_argument("[invert] ~ needs a bool tensor");
    return logical_not(x);
  });
  cls.def("__and__", [](T a, T b) { return logical_and(a, b); }, py::is_operator());
  cls.def("__or__", [](T a, T b) { return logical_or(a, b); }, py::is_operator());
  m.def("where", [](T c, T a, T b) { return where(c, a, b); }, py::arg("condition"), py::arg("input"), py::arg("other"));
  m.def("where", [](T c, T a, double b) { return where(c, a, b); }, py::arg("condition"), py::arg("input"),
        py::arg("other"));
  m.def("where", [](T c, double a, T b) { return where(c, a, b); }, py::arg("condition"), py::arg("input"),
        py::arg("other"));
  m.def("where", [](T c, double a, double b) {
    return where(c, scalar_tensor(a), scalar_tensor(b));
  }, py::arg("condition"), py::arg("input"), py::arg("other"));
  expose(m, "where");
  TERRA_PY_BOTH(m, cls, "masked_fill", [](T x, T mask, double v) { return masked_fill(x, mask, v); },
                py::arg("mask"), py::arg("value"));

  // activations
  TERRA_PY_BOTH(m, cls, "relu", [](T x) { return relu(x); });
  TERRA_PY_BOTH(m, cls, "leaky_relu", [](T x, double s) { return leaky_relu(x, s); },
                py::arg("negative_slope") = 0.01);
  TERRA_PY_BOTH(m, cls, "gelu", [](T x, const std::string& approximate) {
    if (approximate != "none" && approximate != "tanh")
      throw std::invalid_argument("[gelu] approximate must be 'none' or 'tanh', got '" + approximate + "'");
    return gelu(x, approximate == "tanh");
  }, py::arg("approximate") = "none");
  m.def("gelu_backward", [](T g, T x, bool t) { return gelu_backward(g, x, t); }, py::arg("grad"), py::arg("input"),
        py::arg("tanh_approximation") = false);
  expose(m, "gelu_backward");
  TERRA_PY_BOTH(m, cls, "sigmoid", [](T x) { return sigmoid(x); });
  TERRA_PY_BOTH(m, cls, "tanh", [](T x) { return tanh(x); });
  TERRA_PY_BOTH(m, cls, "softplus", [](T x, double beta, double th) { return softplus(x, beta, th); },
                py::arg("beta") = 1.0, py::arg("threshold") = 20.0);

  // extremes and statistics. max/min(dim=...) return (values, indices) as torch; see _api.py.
  m.def("_max", [](T x) { return max(x); });
  m.def("_min", [](T x) { return min(x); });
  m.def("_max_dim", [](T x, Int d, bool k) { return max(x, d.get("max", "dim"), k); });
  m.def("_min_dim", [](T x, Int d, bool k) { return min(x, d.get("min", "dim"), k); });
  expose(m, "max");
  expose(m, "min");
  TERRA_PY_BOTH(m, cls, "argmax", [](T x, std::optional<Int> d, bool k) {
    return d ? argmax(x, d->get("argmax", "dim"), k) : argmax(x);
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  TERRA_PY_BOTH(m, cls, "argmin", [](T x, std::optional<Int> d, bool k) {
    return d ? argmin(x, d->get("argmin", "dim"), k) : argmin(x);
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  TERRA_PY_BOTH(m, cls, "var", [](T x, py::object dim, bool unbiased, bool k) {
    return var(x, dims_from_object(dim, "var"), unbiased, k);
  }, py::arg("dim") = py::none(), py::arg("unbiased") = true, py::arg("keepdim") = false);
  TERRA_PY_BOTH(m, cls, "std", [](T x, py::object dim, bool unbiased, bool k) {
    return std_(x, dims_from_object(dim, "std"), unbiased, k);
  }, py::arg("dim") = py::none(), py::arg("unbiased") = true, py::arg("keepdim") = false);
}

}  // namespace terra::python
