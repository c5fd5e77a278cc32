// Factories: zeros/ones/full/arange (+ _like forms). terra.tensor() itself lives in __init__.py
// (dtype inference from Python data) on top of _from_numpy.
#include "binding.h"

namespace terra::python {
namespace {

DType dtype_or(const py::object& d, DType dflt) { return d.is_none() ? dflt : dtype_from_object(d); }
Tensor finish(Tensor t, bool requires_grad) {
  if (requires_grad) t.requires_grad_(true);
  return t;
}

}  // namespace

void bind_creation(py::module_& m) {
  m.def("zeros", [](py::args a, py::object dtype, bool rg) {
    return finish(zeros(shape_from_args(a, "zeros"), dtype_or(dtype, DType::Float32)), rg);
  }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("requires_grad") = false);
  m.def("ones", [](py::args a, py::object dtype, bool rg) {
    return finish(ones(shape_from_args(a, "ones"), dtype_or(dtype, DType::Float32)), rg);
  }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("requires_grad") = false);
  m.def("full", [](py::object size, double value, py::object dtype, bool rg) {
    return finish(full(shape_from_object(size, "full"), value, dtype_or(dtype, DType::Float32)), rg);
  }, py::arg("size"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
     py::arg("requires_grad") = false);
  m.def("zeros_like", [](const Tensor& t, py::object dtype, bool rg) {
    return finish(zeros(t.shape(), dtype_or(dtype, t.dtype())), rg);
  }, py::arg("input"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("requires_grad") = false);
  m.def("ones_like", [](const Tensor& t, py::object dtype, bool rg) {
    return finish(ones(t.shape(), dtype_or(dtype, t.dtype())), rg);
  }, py::arg("input"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("requires_grad") = false);
  m.def("full_like", [](const Tensor& t, double v, py::object dtype, bool rg) {
    return finish(full(t.shape(), v, dtype_or(dtype, t.dtype())), rg);
  }, py::arg("input"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
     py::arg("requires_grad") = false);
  // arange(end) / arange(start, end, step=1): integer bounds, int64 unless dtype says otherwise.
  m.def("arange", [](Int a, py::object b, Int step, py::object dtype, bool rg) {
    int64_t first = a.get("arange", b.is_none() ? "end" : "start");
    int64_t start = b.is_none() ? 0 : first, end = b.is_none() ? first : int_arg(b, "arange", "end");
    return finish(arange(start, end, step.get("arange", "step"), dtype_or(dtype, DType::Int64)), rg);
  }, py::arg("start"), py::arg("end") = py::none(), py::arg("step") = py::int_(1), py::kw_only(),
     py::arg("dtype") = py::none(), py::arg("requires_grad") = false);
  m.def("scalar_tensor", [](double v, py::object dtype) { return scalar_tensor(v, dtype_or(dtype, DType::Float32)); },
        py::arg("value"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("eye", [](Int n, std::optional<Int> mm, py::object dtype, bool rg) {
    return finish(eye(n.get("eye", "n"), mm ? mm->get("eye", "m") : -1, dtype_or(dtype, DType::Float32)), rg);
  }, py::arg("n"), py::arg("m") = py::none(), py::kw_only(), py::arg("dtype") = py::none(),
     py::arg("requires_grad") = false);
  for (const char* n : {"zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange", "scalar_tensor",
                        "eye"})
    expose(m, n);
}

}  // namespace terra::python
