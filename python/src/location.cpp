// Python-side op locations for co-execution. An op call's location is
//   [C++ return addresses from the dispatcher up to the interpreter] + [0] +
//   [(code object, instruction offset) of each Python frame, innermost first, up to the step's frame]
// The C++ part tells apart the ops one Python call runs (a composite op, loss.backward()); the
// Python part is the call site and its calling context. Exact (no hashing), cheap: it runs on every
// op call inside a step, so it builds no Python object and no string. On CPython 3.11 the frames are
// read from the interpreter's own frame records (_PyInterpreterFrame), which the public API would
// first turn into frame objects (one allocation per Python call that runs an op). Readable text
// (file:line in function) is made only on request (_describe_location: errors, explain, tests).
//
// Identity: a code object seen in a location is kept alive from then on (a retained set, with a
// small cache in front so the common case is one compare), so its address is never reused by
// another code object and two different call sites never compare equal; the same site compares
// equal on every step.
#include <Python.h>
#include <link.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define TERRA_PY_IFRAME 1
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#else
#define TERRA_PY_IFRAME 0
#endif

#include <unordered_set>

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

// Code objects that appear in locations, retained (strong references) so their addresses stay
// unique for the life of the process. Only touched with the GIL held.
std::unordered_set<PyObject*>* g_codes = nullptr;
PyObject* g_code_cache[64] = {};  // direct-mapped front of g_codes

inline void retain_code(PyObject* code) {
  size_t slot = (reinterpret_cast<uintptr_t>(code) >> 4) & 63;
  if (g_code_cache[slot] == code) return;
  if (!g_codes) g_codes = new std::unordered_set<PyObject*>();  // never freed: outlives finalization
  if (g_codes->insert(code).second) Py_INCREF(code);
  g_code_cache[slot] = code;
}

#if TERRA_PY_IFRAME
thread_local _PyInterpreterFrame* g_step_iframe = nullptr;  // the step frame's interpreter record

void append_python_frames(std::vector<uintptr_t>& out) {
  PyThreadState* ts = PyThreadState_Get();
  for (_PyInterpreterFrame* f = ts->cframe->current_frame; f; f = f->previous) {
    if (_PyFrame_IsIncomplete(f)) continue;  // a frame still being set up (as PyFrame_GetBack skips)
    PyObject* code = reinterpret_cast<PyObject*>(f->f_code);
    retain_code(code);
    out.push_back(reinterpret_cast<uintptr_t>(code));
    // The byte offset, as PyFrame_GetLasti gives it.
    out.push_back(uintptr_t(uint32_t(_PyInterpreterFrame_LASTI(f) * int(sizeof(_Py_CODEUNIT)))));
    if (f == g_step_iframe) break;
  }
}
#else
void append_python_frames(std::vector<uintptr_t>& out) {
  PyFrameObject* f = PyEval_GetFrame();  // borrowed; the innermost Python frame (the op's caller)
  if (!f) return;
  Py_INCREF(f);
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    retain_code(reinterpret_cast<PyObject*>(code));
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
#endif

// "file:line in function" of one (code, offset) pair; only for retained code objects (any other
// address may be stale).
std::string describe_frame(uintptr_t code, uintptr_t lasti) {
  PyObject* c = reinterpret_cast<PyObject*>(code);
  if (!g_codes || !g_codes->count(c)) return "<unknown code>";
  auto* co = reinterpret_cast<PyCodeObject*>(c);
  int line = PyCode_Addr2Line(co, int(lasti));
  py::str file = py::reinterpret_borrow<py::object>(co->co_filename);
  py::str name = py::reinterpret_borrow<py::object>(co->co_qualname);
  return std::string(file) + ":" + std::to_string(line) + " in " + std::string(name);
}

// Installed as trace's LocationProvider while a Python step is active. The step's thread may have
// released the GIL (a fetch waiting for the runner); an op it then runs (a fallback replaying the
// step) takes the GIL back for the walk, so its location is the one the same call has with the GIL
// held. Other threads (the runner) have no step frame: the C++ walk alone, as without the binding.
void provider(trace::Location& out) {
  bool python = g_step_frame != nullptr;
  bool ensure = python && !PyGILState_Check();
  cpp_frames(out, python);
  if (!python) return;
  out.frames.push_back(0);
  if (ensure) {
    PyGILState_STATE st = PyGILState_Ensure();
    append_python_frames(out.frames);
    PyGILState_Release(st);
  } else {
    append_python_frames(out.frames);
  }
}
}  // namespace

void set_step_frame(PyObject* frame) {
  Py_XINCREF(frame);
  PyObject* old = g_step_frame;
  g_step_frame = frame;
#if TERRA_PY_IFRAME
  g_step_iframe = frame ? reinterpret_cast<PyFrameObject*>(frame)->f_frame : nullptr;
#endif
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
  m.def("_describe_location", [](py::object loc) {
    // _location()'s list is all pairs; _full_location()'s (hash, frames) has a C++ part first, which
    // ends at its 0 (no return address is 0).
    std::vector<uint64_t> frames;
    size_t i = 0;
    if (py::isinstance<py::tuple>(loc)) {
      frames = loc.cast<py::tuple>()[1].cast<std::vector<uint64_t>>();
      while (i < frames.size() && frames[i] != 0) ++i;
      i = i < frames.size() ? i + 1 : frames.size();
    } else {
      frames = loc.cast<std::vector<uint64_t>>();
    }
    std::vector<std::string> out;
    for (; i + 1 < frames.size(); i += 2) out.push_back(describe_frame(frames[i], frames[i + 1]));
    return out;
  }, py::arg("location"),
        "Readable Python frames (file:line in function, innermost first) of _location() or "
        "_full_location(); made only when asked for.");
  m.def("_full_location", [] {
    trace::Location loc;
    trace::capture_location(loc);
    return py::make_tuple(loc.hash, std::vector<uint64_t>(loc.frames.begin(), loc.frames.end()));
  }, "(hash, frames) as the tracer records them for an op called here.");
  m.def("_set_step_frame", [](py::object frame) { set_step_frame(frame.is_none() ? nullptr : frame.ptr()); },
        py::arg("frame"), "Marks the frame that entered a step (None clears).");
}

}  // namespace terra::python
