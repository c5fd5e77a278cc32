// Python-side op locations for co-execution: the chain of (code object, instruction offset) of the
// Python frames inside the current step, innermost first. Two op calls match only if their
// locations match, so this must be exact (no hashing) and cheap (it runs on every op call).
#include <Python.h>

#include "binding.h"

namespace terra::python {
namespace {
// The frame that entered the step (strong reference); frames above it are outside the step.
thread_local PyObject* g_step_frame = nullptr;
}  // namespace

void set_step_frame(PyObject* frame) {
  Py_XINCREF(frame);
  PyObject* old = g_step_frame;
  g_step_frame = frame;
  Py_XDECREF(old);
}

// Layout: [code0, lasti0, code1, lasti1, ...]. code is the PyCodeObject's address: a function's
// code object lives as long as its module, so the address identifies the code while it can run.
// lasti is the byte offset of the instruction being executed (the CALL of the op).
std::vector<uint64_t> python_location() {
  std::vector<uint64_t> loc;
  PyFrameObject* f = PyEval_GetFrame();  // borrowed; innermost Python frame (the op's caller)
  if (!f) return loc;
  loc.reserve(16);
  Py_INCREF(f);
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    loc.push_back(reinterpret_cast<uintptr_t>(code));
    loc.push_back(uint64_t(uint32_t(PyFrame_GetLasti(f))));
    Py_DECREF(code);
    if (reinterpret_cast<PyObject*>(f) == g_step_frame) {
      Py_DECREF(f);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference or null
    Py_DECREF(f);
    f = back;
  }
  return loc;
}

void bind_location(py::module_& m) {
  m.def("_location", [] { return python_location(); },
        "The current Python location: [code id, instruction offset] pairs, innermost first, up to the "
        "frame that entered the step.");
  m.def("_set_step_frame", [](py::object frame) { set_step_frame(frame.is_none() ? nullptr : frame.ptr()); },
        py::arg("frame"), "Marks the frame that entered a step (None clears).");
  m.def("_caller_frame", [] {
    PyFrameObject* f = PyEval_GetFrame();
    return f ? py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(f)) : py::none();
  });
}

}  // namespace terra::python
