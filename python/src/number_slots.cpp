// terra.Tensor's arithmetic operators straight from the interpreter's number slots. Through
// pybind11, `a + b` looked `__add__` up on the type, made a bound method and an argument tuple, and
// ran pybind11's dispatcher (two vectors allocated per call, overloads tried in turn): about 1 900
// instructions around an op whose C++ call costs 1 500 (callgrind, a 1x8 `x + b`). The slot below
// does the same calls for the usual operands — two tensors, or a tensor and a Python float or int —
// and hands every other case to the methods (`__add__`, then `__radd__`), as CPython's own slot
// does, so results, NotImplemented and errors are unchanged.
#include "binding.h"

namespace terra::python {
namespace {

using TensorCaster = py::detail::make_caster<Tensor>;

bool is_tensor(PyObject* o) { return PyObject_TypeCheck(o, TensorCaster::tinfo()->type); }

// o's Tensor (o is_tensor), or null where pybind11 cannot read one (an instance whose __init__ did
// not run): the methods then raise what they raise.
const Tensor* tensor_of(PyObject* o, TensorCaster& c) {
  if (!c.load(o, false)) return nullptr;
  return &static_cast<Tensor&>(c);
}

// A Python float or int (exactly those types: bool, numpy scalars and the rest take the methods,
// which convert as before) as the double the methods' `double` overloads would receive.
bool number_of(PyObject* o, double* v) {
  if (PyFloat_CheckExact(o)) {
    *v = PyFloat_AS_DOUBLE(o);
    return true;
  }
  if (PyLong_CheckExact(o)) {
    *v = PyLong_AsDouble(o);
    if (*v == -1.0 && PyErr_Occurred()) {  // too large for a double: the methods raise what they raise
      PyErr_Clear();
      return false;
    }
    return true;
  }
  return false;
}

// What CPython's generic slot does for a type whose operator methods are pybind11 functions.
PyObject* by_methods(PyObject* a, PyObject* b, PyObject* name, PyObject* rname) {
  if (is_tensor(a)) {
    PyObject* args[2] = {a, b};
    PyObject* r = PyObject_VectorcallMethod(name, args, 2, nullptr);
    if (r != Py_NotImplemented) return r;
    Py_DECREF(r);
  }
  if (rname && Py_TYPE(a) != Py_TYPE(b) && is_tensor(b)) {
    PyObject* args[2] = {b, a};
    return PyObject_VectorcallMethod(rname, args, 2, nullptr);
  }
  Py_RETURN_NOTIMPLEMENTED;
}

// Runs f and returns its Tensor as a new terra.Tensor; a C++ exception becomes the Python exception
// pybind11's registered translators make of it (errors.cpp), as in a bound method.
template <class F>
PyObject* call(F&& f) {
  try {
    return TensorCaster::cast(f(), py::return_value_policy::move, nullptr).ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    if (py::detail::apply_exception_translators(py::detail::get_local_internals().registered_exception_translators) ||
        py::detail::apply_exception_translators(py::detail::get_internals().registered_exception_translators))
      return nullptr;
    PyErr_SetString(PyExc_SystemError, "Exception escaped from default exception translator!");
    return nullptr;
  }
}

// One binary operator: tensor op tensor, tensor op number and number op tensor (the reflected
// method's result) here; the rest through `name` / `rname`.
template <class TT, class TN, class NT>
PyObject* binary(PyObject* a, PyObject* b, TT tt, TN tn, NT nt, PyObject* name, PyObject* rname) {
  TensorCaster ca, cb;
  const Tensor* ta = nullptr;
  const Tensor* tb = nullptr;
  double v;
  const bool at = is_tensor(a), bt = is_tensor(b);
  if (at && bt) {
    if ((ta = tensor_of(a, ca)) && (tb = tensor_of(b, cb))) return call([&] { return tt(*ta, *tb); });
  } else if (at && number_of(b, &v)) {
    if ((ta = tensor_of(a, ca))) return call([&] { return tn(*ta, v); });
  } else if (bt && number_of(a, &v)) {
    if ((tb = tensor_of(b, cb))) return call([&] { return nt(v, *tb); });
  }
  return by_methods(a, b, name, rname);
}

PyObject* g_names[10];  // interned __add__, __radd__, ... (set by install_number_slots)
enum { kAdd, kRadd, kSub, kRsub, kMul, kRmul, kDiv, kRdiv, kMatmul, kNeg };

PyObject* add(PyObject* a, PyObject* b) {
  return binary(a, b, [](const Tensor& x, const Tensor& y) { return x + y; },
                [](const Tensor& x, double y) { return x + y; }, [](double x, const Tensor& y) { return x + y; },
                g_names[kAdd], g_names[kRadd]);
}
PyObject* sub(PyObject* a, PyObject* b) {
  return binary(a, b, [](const Tensor& x, const Tensor& y) { return x - y; },
                [](const Tensor& x, double y) { return x - y; }, [](double x, const Tensor& y) { return x - y; },
                g_names[kSub], g_names[kRsub]);
}
PyObject* mul(PyObject* a, PyObject* b) {
  return binary(a, b, [](const Tensor& x, const Tensor& y) { return x * y; },
                [](const Tensor& x, double y) { return x * y; }, [](double x, const Tensor& y) { return x * y; },
                g_names[kMul], g_names[kRmul]);
}
PyObject* truediv(PyObject* a, PyObject* b) {
  return binary(a, b, [](const Tensor& x, const Tensor& y) { return x / y; },
                [](const Tensor& x, double y) { return x / y; }, [](double x, const Tensor& y) { return x / y; },
                g_names[kDiv], g_names[kRdiv]);
}
PyObject* matmul_slot(PyObject* a, PyObject* b) {
  TensorCaster ca, cb;
  const Tensor *ta, *tb;
  if (is_tensor(a) && is_tensor(b) && (ta = tensor_of(a, ca)) && (tb = tensor_of(b, cb)))
    return call([&] { return matmul(*ta, *tb); });
  return by_methods(a, b, g_names[kMatmul], nullptr);  // there is no __rmatmul__
}
PyObject* negative(PyObject* a) {
  TensorCaster ca;
  if (const Tensor* ta = is_tensor(a) ? tensor_of(a, ca) : nullptr) return call([&] { return -*ta; });
  PyObject* args[1] = {a};
  return PyObject_VectorcallMethod(g_names[kNeg], args, 1, nullptr);
}

}  // namespace

void install_number_slots(py::handle tensor_type) {
  const char* names[] = {"__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
                         "__rmul__", "__truediv__", "__rtruediv__", "__matmul__", "__neg__"};
  for (int k = 0; k < 10; ++k) g_names[k] = PyUnicode_InternFromString(names[k]);  // kept for the process
  // terra.Tensor is a heap type: its number slots live in the type object, read at each operation.
  // Assigning one of these methods later (Tensor.__add__ = f) makes CPython reset that slot to its
  // generic one, which then calls f.
  PyNumberMethods* nb = reinterpret_cast<PyTypeObject*>(tensor_type.ptr())->tp_as_number;
  nb->nb_add = add;
  nb->nb_subtract = sub;
  nb->nb_multiply = mul;
  nb->nb_true_divide = truediv;
  nb->nb_matrix_multiply = matmul_slot;
  nb->nb_negative = negative;
}

}  // namespace terra::python
