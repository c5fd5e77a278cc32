// opsC: softmax / log_softmax and the losses.
#include "binding.h"

namespace terra::python {

void bind_softmax_loss(py::module_& m) {
  auto cls = tensor_class(m);
  using T = const Tensor&;
  TERRA_PY_BOTH(m, cls, "softmax", [](T x, Int d) { return softmax(x, d.get("softmax", "dim")); }, py::arg("dim"));
  TERRA_PY_BOTH(m, cls, "log_softmax", [](T x, Int d) { return log_softmax(x, d.get("log_softmax", "dim")); },
                py::arg("dim"));
  m.def("cross_entropy", [](T x, T t, int64_t ii, std::string r) { return cross_entropy(x, t, ii, std::move(r)); },
        py::arg("input"), py::arg("target"), py::arg("ignore_index") = -100, py::arg("reduction") = "mean");
  m.def("nll_loss", [](T x, T t, int64_t ii, std::string r) { return nll_loss(x, t, ii, std::move(r)); },
        py::arg("input"), py::arg("target"), py::arg("ignore_index") = -100, py::arg("reduction") = "mean");
  m.def("mse_loss", [](T a, T b, std::string r) { return mse_loss(a, b, std::move(r)); }, py::arg("input"),
        py::arg("target"), py::arg("reduction") = "mean");
  m.def("binary_cross_entropy_with_logits", [](T a, T b, std::string r) {
    return binary_cross_entropy_with_logits(a, b, std::move(r));
  }, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean");
  for (const char* n : {"cross_entropy", "nll_loss", "mse_loss", "binary_cross_entropy_with_logits"}) expose(m, n);
}

}  // namespace terra::python
