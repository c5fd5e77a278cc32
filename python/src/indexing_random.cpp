// opsC: joining/splitting, integer indexing, embedding, and the random ops.
#include "binding.h"

namespace terra::python {

void bind_indexing_random(py::module_& m) {
  auto cls = tensor_class(m);
  using T = const Tensor&;
  m.def("cat", [](const std::vector<Tensor>& ts, Int d) { return cat(ts, d.get("cat", "dim")); }, py::arg("tensors"),
        py::arg("dim") = py::int_(0));
  m.def("stack", [](const std::vector<Tensor>& ts, Int d) { return stack(ts, d.get("stack", "dim")); },
        py::arg("tensors"), py::arg("dim") = py::int_(0));
  // split(x, int) pieces of that size; split(x, [sizes]) pieces of those sizes (torch).
  auto split_fn = [](T x, py::object s, Int d) {
    if (py::isinstance<py::int_>(s)) return split(x, int_arg(s, "split", "split_size"), d.get("split", "dim"));
    return split(x, dims_from_object(s, "split"), d.get("split", "dim"));
  };
  TERRA_PY_BOTH(m, cls, "split", split_fn, py::arg("split_size_or_sections"), py::arg("dim") = py::int_(0));
  TERRA_PY_BOTH(m, cls, "chunk", [](T x, Int c, Int d) { return chunk(x, c.get("chunk", "chunks"), d.get("chunk", "dim")); },
                py::arg("chunks"), py::arg("dim") = py::int_(0));
  TERRA_PY_BOTH(m, cls, "index_select", [](T x, Int d, T i) { return index_select(x, d.get("index_select", "dim"), i); },
                py::arg("dim"), py::arg("index"));
  TERRA_PY_BOTH(m, cls, "gather", [](T x, Int d, T i) { return gather(x, d.get("gather", "dim"), i); }, py::arg("dim"),
                py::arg("index"));
  // torch.nn.functional.embedding's argument order: (indices, weight).
  m.def("embedding", [](T idx, T w, std::optional<int64_t> pad) { return embedding(w, idx, pad); },
        py::arg("input"), py::arg("weight"), py::arg("padding_idx") = py::none());
  for (const char* n : {"cat", "stack", "embedding"}) expose(m, n);

  auto dtype_or = [](const py::object& d) { return d.is_none() ? DType::Float32 : dtype_from_object(d); };
  m.def("rand", [dtype_or](py::args a, py::object dtype, bool rg) {
    Tensor t = rand(shape_from_args(a, "rand"), dtype_or(dtype));
    if (rg) t.requires_grad_(true);
    return t;
  }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("requires_grad") = false);
  m.def("randn", [dtype_or](py::args a, py::object dtype, bool rg) {
    Tensor t = randn(shape_from_args(a, "randn"), dtype_or(dtype));
    if (rg) t.requires_grad_(true);
    return t;
  }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("requires_grad") = false);
  m.def("rand_like", [dtype_or](T x, py::object dtype) {
    return rand(x.shape(), dtype.is_none() ? x.dtype() : dtype_or(dtype));
  }, py::arg("input"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("randn_like", [dtype_or](T x, py::object dtype) {
    return randn(x.shape(), dtype.is_none() ? x.dtype() : dtype_or(dtype));
  }, py::arg("input"), py::kw_only(), py::arg("dtype") = py::none());
  // randint(high, size) or randint(low, high, size), as torch.
  m.def("randint", [](Int a, py::object b, py::object size) {
    if (size.is_none()) return randint(0, a.get("randint", "high"), shape_from_object(b, "randint"));
    return randint(a.get("randint", "low"), int_arg(b, "randint", "high"), shape_from_object(size, "randint"));
  }, py::arg("low"), py::arg("high"), py::arg("size") = py::none());
  m.def("bernoulli", [](T p) { return bernoulli(p); }, py::arg("input"));
  m.def("dropout", [](T x, double p, bool training) { return dropout(x, p, training); }, py::arg("input"),
        py::arg("p") = 0.5, py::arg("train") = true);
  for (const char* n : {"rand", "randn", "rand_like", "randn_like", "randint", "bernoulli", "dropout"}) expose(m, n);
}

}  // namespace terra::python
