// How C++ exceptions reach Python (the table is in README.md, "Errors"): pybind11's defaults, plus
// two classes for terra's own errors so that both Python's and torch's habits catch them. torch
// raises RuntimeError for a shape mismatch or an allocation failure where Python convention (and
// terra, since 0.1) says ValueError / MemoryError: terra.InvalidArgumentError is both a ValueError
// and a RuntimeError, terra.OutOfMemoryError both a MemoryError and a RuntimeError.
#include <stdexcept>

#include "binding.h"

namespace terra::python {
namespace {

PyObject* new_error(py::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
  py::tuple b(bases.size());
  size_t i = 0;
  for (PyObject* base : bases) b[i++] = py::reinterpret_borrow<py::object>(base);
  std::string qual = std::string("terra.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qual.c_str(), doc, b.ptr(), nullptr);
  if (!type) throw py::error_already_set();
  m.attr(name) = py::reinterpret_steal<py::object>(type);  // the module keeps it alive
  return type;
}

}  // namespace

void bind_errors(py::module_& m) {
  static PyObject* invalid = new_error(
      m, "InvalidArgumentError", {PyExc_ValueError, PyExc_RuntimeError},
      "A bad call (shapes, dtypes, attributes, values the host fed, misuse): C++ std::invalid_argument. "
      "A ValueError, and a RuntimeError as torch raises for the same mistakes.");
  static PyObject* oom = new_error(
      m, "OutOfMemoryError", {PyExc_MemoryError, PyExc_RuntimeError},
      "A tensor's storage could not be allocated: C++ terra::OutOfMemory. A MemoryError and a RuntimeError.");
  // Later-registered translators run first; what is not caught here goes on to pybind11's defaults
  // (out_of_range -> IndexError, overflow_error -> OverflowError, bad_alloc -> MemoryError, the rest
  // of std::exception -> RuntimeError).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OutOfMemory& e) {
      PyErr_SetString(oom, e.what());
    } catch (const std::invalid_argument& e) {
      PyErr_SetString(invalid, e.what());
    }
  });

  // Test hook (tests/python/test_error_classes.py): throws one C++ exception class by name, so every
  // class of the table is checked through the same translation, inside a step of each mode.
  m.def("_throw_cpp", [](const std::string& kind, const std::string& msg) {
    if (kind == "invalid_argument") throw std::invalid_argument(msg);
    if (kind == "domain_error") throw std::domain_error(msg);
    if (kind == "length_error") throw std::length_error(msg);
    if (kind == "out_of_range") throw std::out_of_range(msg);
    if (kind == "logic_error") throw std::logic_error(msg);
    if (kind == "range_error") throw std::range_error(msg);
    if (kind == "overflow_error") throw std::overflow_error(msg);
    if (kind == "underflow_error") throw std::underflow_error(msg);
    if (kind == "runtime_error") throw std::runtime_error(msg);
    if (kind == "OutOfMemory") throw OutOfMemory(msg);
    if (kind == "bad_alloc") throw std::bad_alloc();
    if (kind == "exception") throw std::exception();
    throw std::invalid_argument("[_throw_cpp] unknown kind '" + kind + "'");
  }, py::arg("kind"), py::arg("message") = "");
}

}  // namespace terra::python
