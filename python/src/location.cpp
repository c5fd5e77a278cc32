// Python-side op locations for co-execution. An op call's location is
//   [C++ return addresses from the dispatcher up to the interpreter] + [0] +
//   [(code object, instruction offset) of each Python frame, innermost first, up to the step's frame]
// The C++ part tells apart the ops one Python call runs (a composite op, loss.backward()); the
// Python part is the call site and its calling context. Exact (no hashing), cheap (no allocation
// beyond the vector, no symbol lookups): it runs on every op call inside a step.
#include <Python.h>
#include <link.h>

#include "binding.h"
#include "terra/trace/location.h"

namespace terra::python {
namespace {
// The frame that entered the step (strong reference); frames above it are outside the step.
thread_local PyObject* g_step_frame = nullptr;
constexpr int kMaxCppFrames = 64;

// Address range of the interpreter's code (python3.11 is linked statically into /usr/bin/python3;
// a shared libpython is found too). A return address in it means the C++ part is complete.
struct Range {
  uintptr_t lo = 0, hi = 0;
};
Range g_interp[4];
int g_ninterp = 0;

bool in_interpreter(uintptr_t ret) {
  for (int i = 0; i < g_ninterp; ++i)
    if (ret >= g_interp[i].lo && ret < g_interp[i].hi) return true;
  return false;
}

void find_interpreter_ranges() {
  uintptr_t probe = reinterpret_cast<uintptr_t>(&PyEval_GetFrame);
  dl_iterate_phdr([](dl_phdr_info* info, size_t, void* data) -> int {
    uintptr_t probe = *static_cast<uintptr_t*>(data);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
      const auto& ph = info->dlpi_phdr[i];
      if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
      uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
      if (probe >= lo && probe < hi && g_ninterp < 4) g_interp[g_ninterp++] = {lo, hi};
    }
    return 0;
  }, &probe);
}

// Frame-pointer walk, as trace::capture_location does: skip our frame and capture_location's (the
// executor calling it differs between tracing and co-execution), keep return addresses up to the
// interpreter (or, without Python on this thread, up to the step's C++ base frame).
__attribute__((noinline)) void cpp_frames(trace::Location& out, bool to_interpreter) {
  auto* fp = static_cast<uintptr_t*>(__builtin_frame_address(0));
  auto* base = static_cast<uintptr_t*>(trace::step_base());
  for (int skip = 0; skip < 3 && fp; ++skip) fp = reinterpret_cast<uintptr_t*>(fp[0]);
  for (int n = 0; fp && n < kMaxCppFrames; ++n) {
    if (!to_interpreter && base && fp >= base) break;
    uintptr_t ret = fp[1];
    if (to_interpreter && in_interpreter(ret)) break;
    out.frames.push_back(ret);
    auto* next = reinterpret_cast<uintptr_t*>(fp[0]);
    if (next <= fp) break;
    fp = next;
  }
}

void append_python_frames(std::vector<uintptr_t>& out) {
  PyFrameObject* f = PyEval_GetFrame();  // borrowed; the innermost Python frame (the op's caller)
  if (!f) return;
  Py_INCREF(f);
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    out.push_back(reinterpret_cast<uintptr_t>(code));
    out.push_back(uintptr_t(uint32_t(PyFrame_GetLasti(f))));
    Py_DECREF(code);
    if (reinterpret_cast<PyObject*>(f) == g_step_frame) {
      Py_DECREF(f);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference or null
    Py_DECREF(f);
    f = back;
  }
}

// Installed as trace's LocationProvider while a Python step is active.
void provider(trace::Location& out) {
  bool python = g_step_frame && PyGILState_Check();
  cpp_frames(out, python);
  if (!python) return;  // a C++ thread (or no Python step): the C++ walk alone, as without the binding
  out.frames.push_back(0);
  append_python_frames(out.frames);
}
}  // namespace

void set_step_frame(PyObject* frame) {
  Py_XINCREF(frame);
  PyObject* old = g_step_frame;
  g_step_frame = frame;
  Py_XDECREF(old);
  trace::set_location_provider(frame ? &provider : nullptr);
}

// The Python part alone: [code0, lasti0, code1, lasti1, ...]. code is the PyCodeObject's address
// (a function's code object lives as long as its function, so while it can run the address names
// it); lasti is the byte offset of the instruction being executed (the CALL of the op).
std::vector<uint64_t> python_location() {
  std::vector<uintptr_t> f;
  f.reserve(16);
  append_python_frames(f);
  return std::vector<uint64_t>(f.begin(), f.end());
}

void bind_location(py::module_& m) {
  find_interpreter_ranges();
  m.def("_location", [] { return python_location(); },
        "The current Python location: [code id, instruction offset] pairs, innermost first, up to the "
        "frame that entered the step.");
  m.def("_full_location", [] {
    trace::Location loc;
    trace::capture_location(loc);
    return py::make_tuple(loc.hash, std::vector<uint64_t>(loc.frames.begin(), loc.frames.end()));
  }, "(hash, frames) as the tracer records them for an op called here.");
  m.def("_set_step_frame", [](py::object frame) { set_step_frame(frame.is_none() ? nullptr : frame.ptr()); },
        py::arg("frame"), "Marks the frame that entered a step (None clears).");
}

}  // namespace terra::python
