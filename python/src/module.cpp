// The extension module terra._terra: dtypes, grad mode, the op registry, and every bind_* group.
#include <set>
#include <stdexcept>

#include "binding.h"

namespace terra::python {

namespace {
std::set<std::string>& exposed() {
  static std::set<std::string> s;
  return s;
}
}  // namespace

void expose(py::module_& m, const char* name) { exposed().insert(name); }

int64_t int_arg(const py::handle& h, const char* op, const char* arg) {
  py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!i) {
    PyErr_Clear();
    throw py::type_error(std::string("[") + op + "] " + arg + " must be an int, got " +
                         std::string(py::str(h.get_type().attr("__name__"))));
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow)  // std::overflow_error reaches Python as OverflowError
    throw std::overflow_error(std::string("[") + op + "] " + arg + " " + std::string(py::str(i)) +
                              " is out of the int64 range");
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return int64_t(v);
}

Shape shape_from_object(const py::handle& obj, const char* op) {
  if (py::isinstance<py::int_>(obj)) return {int_arg(obj, op, "size")};
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj))
    throw std::invalid_argument(std::string("[") + op + "] a shape must be ints or a sequence of ints, got " +
                                std::string(py::str(obj.get_type().attr("__name__"))));
  Shape s;
  for (py::handle h : obj) {
    if (!py::isinstance<py::int_>(h) && !py::hasattr(h, "__index__"))
      throw std::invalid_argument(std::string("[") + op + "] a shape must hold ints, got " +
                                  std::string(py::repr(obj)));
    s.push_back(int_arg(h, op, "size"));
  }
  return s;
}

Shape shape_from_args(const py::args& args, const char* op) {
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) return shape_from_object(args[0], op);
  Shape s;
  for (py::handle h : args) {
    if (!py::isinstance<py::int_>(h))
      throw std::invalid_argument(std::string("[") + op + "] a shape must hold ints, got " +
                                  std::string(py::repr(args)));
    s.push_back(int_arg(h, op, "size"));
  }
  return s;
}

std::vector<int64_t> dims_from_object(const py::handle& obj, const char* op) {
  if (obj.is_none()) return {};
  if (py::isinstance<py::int_>(obj)) return {int_arg(obj, op, "dim")};
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj)) return obj.cast<std::vector<int64_t>>();
  std::vector<int64_t> d;
  for (py::handle h : obj) d.push_back(int_arg(h, op, "dim"));
  return d;
}

DType dtype_from_object(const py::handle& obj) {
  if (py::isinstance<DType>(obj)) return obj.cast<DType>();
  std::string s = py::str(obj);
  if (s == "float32" || s == "float") return DType::Float32;
  if (s == "float64" || s == "double") return DType::Float64;
  if (s == "int64" || s == "long") return DType::Int64;
  if (s == "bool") return DType::Bool;
  throw std::invalid_argument("[dtype] unknown dtype " + std::string(py::repr(obj)));
}

}  // namespace terra::python

using namespace terra;
using namespace terra::python;

PYBIND11_MODULE(_terra, m) {
  m.doc() = "terra: imperative-symbolic co-execution runtime (C++ core)";
  bind_errors(m);  // first: exception classes and their translation (errors.cpp)

  py::enum_<DType>(m, "dtype")
      .value("float32", DType::Float32)
      .value("float64", DType::Float64)
      .value("int64", DType::Int64)
      .value("bool", DType::Bool)
      .def_property_readonly("is_floating_point", [](DType d) { return is_floating(d); })
      .def_property_readonly("itemsize", [](DType d) { return itemsize(d); });
  m.attr("float32") = DType::Float32;
  m.attr("float64") = DType::Float64;
  m.attr("int64") = DType::Int64;
  m.attr("bool") = DType::Bool;
  m.attr("float") = DType::Float32;
  m.attr("double") = DType::Float64;
  m.attr("long") = DType::Int64;

  m.def("is_grad_enabled", &grad_enabled);
  m.def("set_grad_enabled", &set_grad_enabled, py::arg("mode"));
  m.def("manual_seed", [](uint64_t seed) { manual_seed(seed); }, py::arg("seed"));
  m.def("set_num_threads", &set_num_threads, py::arg("n"),
        "Threads terra's CPU kernels use (the caller included); n < 1 raises ValueError.");
  m.def("set_thread_affinity", &set_thread_affinity, py::arg("on"),
        "Pin terra's pool workers to one CPU each and GraphRunners to the other CPUs (on by default).");
  m.def("get_thread_affinity", &thread_affinity, "Whether terra places its own threads (set_thread_affinity).");
  m.def("get_num_threads", &num_threads,
        "Threads terra's CPU kernels use: set_num_threads's value, else OMP_NUM_THREADS, else the usable CPUs.");
  m.def("set_flush_denormal", &set_flush_denormal, py::arg("mode"),
        "True (the default): terra's kernels flush denormal floats to zero, as TensorFlow's do; False: IEEE "
        "gradual underflow, as torch's default. Returns whether this CPU can flush.");
  m.def("get_flush_denormal", &flush_denormal, "Whether terra's kernels flush denormal floats to zero.");
  m.def("_registered_ops", [] {
    std::vector<std::string> names;
    for (const OpDef* op : all_ops()) names.push_back(op->name);
    return names;
  }, "Names of every op registered in libterra.");

  bind_tensor(m);
  bind_numpy_share(m);
  bind_creation(m);
  bind_core_ops(m);
  bind_elementwise(m);
  bind_nn_ops(m);
  bind_softmax_loss(m);
  bind_indexing_random(m);
  bind_nn(m);
  bind_optim(m);
  bind_engine(m);
  bind_location(m);

  m.def("_exposed_ops", [] { return std::vector<std::string>(exposed().begin(), exposed().end()); },
        "Names of the op functions this binding exposes (each needs a conformance case).");
}
