// Core ops as module functions: arithmetic, views, reductions, matmul, casts.
#include "binding.h"

namespace terra::python {

void bind_core_ops(py::module_& m) {
  // Binary arithmetic: tensor-tensor and tensor-scalar (either side).
#define TERRA_PY_BINARY(name, fn)                                                        \
  m.def(name, [](const Tensor& a, const Tensor& b) { return fn(a, b); });                \
  m.def(name, [](const Tensor& a, double b) { return fn(a, b); });                       \
  m.def(name, [](double a, const Tensor& b) { return fn(scalar_like(b, a), b); });       \
  expose(m, name);
  TERRA_PY_BINARY("add", add)
  TERRA_PY_BINARY("sub", sub)
  TERRA_PY_BINARY("mul", mul)
  TERRA_PY_BINARY("div", div)
#undef TERRA_PY_BINARY
  m.def("neg", [](const Tensor& a) { return neg(a); });
  m.def("matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); });

  m.def("reshape", [](const Tensor& x, py::object s) { return reshape(x, shape_from_object(s, "reshape")); },
        py::arg("input"), py::arg("shape"));
  m.def("view", [](const Tensor& x, py::object s) { return view(x, shape_from_object(s, "view")); },
        py::arg("input"), py::arg("shape"));
  m.def("permute", [](const Tensor& x, py::object d) { return permute(x, shape_from_object(d, "permute")); },
        py::arg("input"), py::arg("dims"));
  m.def("transpose", [](const Tensor& x, Int a, Int b) {
    return transpose(x, a.get("transpose", "dim0"), b.get("transpose", "dim1"));
  },
        py::arg("input"), py::arg("dim0"), py::arg("dim1"));
  m.def("slice", [](const Tensor& x, Int d, Int s, Int e, Int st) {
    return slice(x, d.get("slice", "dim"), s.get("slice", "start"), e.get("slice", "end"), st.get("slice", "step"));
  }, py::arg("input"), py::arg("dim"), py::arg("start"), py::arg("end"), py::arg("step") = py::int_(1));
  m.def("select", [](const Tensor& x, Int d, Int i) { return select(x, d.get("select", "dim"), i.get("select", "index")); },
        py::arg("input"), py::arg("dim"), py::arg("index"));
  m.def("expand", [](const Tensor& x, py::object s) { return expand(x, shape_from_object(s, "expand")); },
        py::arg("input"), py::arg("size"));
  m.def("squeeze", [](const Tensor& x, Int d) { return squeeze(x, d.get("squeeze", "dim")); }, py::arg("input"),
        py::arg("dim"));
  m.def("unsqueeze", [](const Tensor& x, Int d) { return unsqueeze(x, d.get("unsqueeze", "dim")); }, py::arg("input"),
        py::arg("dim"));
  m.def("flatten", [](const Tensor& x, Int s, Int e) {
    return flatten(x, s.get("flatten", "start_dim"), e.get("flatten", "end_dim"));
  }, py::arg("input"), py::arg("start_dim") = py::int_(0), py::arg("end_dim") = py::int_(-1));
  m.def("contiguous", [](const Tensor& x) { return contiguous(x); });
  m.def("clone", [](const Tensor& x) { return clone(x); });
  m.def("cast", [](const Tensor& x, py::object d) { return cast(x, dtype_from_object(d)); },
        py::arg("input"), py::arg("dtype"));

  m.def("sum", [](const Tensor& x, py::object dim, bool keepdim) { return sum(x, dims_from_object(dim, "sum"), keepdim); },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("mean", [](const Tensor& x, py::object dim, bool keepdim) { return mean(x, dims_from_object(dim, "mean"), keepdim); },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("sum_to", [](const Tensor& x, py::object s) { return sum_to(x, shape_from_object(s, "sum_to")); },
        py::arg("input"), py::arg("shape"));

  for (const char* n : {"neg", "matmul", "reshape", "view", "permute", "transpose", "slice", "select", "expand",
                        "squeeze", "unsqueeze", "flatten", "contiguous", "clone", "cast", "sum", "mean", "sum_to"})
    expose(m, n);
}

}  // namespace terra::python
