// Python-side op locations for co-execution. An op call's location is
//   [C++ return addresses from the dispatcher up to the interpreter] + [0] +
//   [(code object, instruction offset) of each Python frame, innermost first, up to the step's frame]
// The C++ part tells apart the ops one Python call runs (a composite op, loss.backward()); the
// Python part is the call site and its calling context. Exact (no hashing), cheap: it runs on every
// op call inside a step, so it builds no Python object and no string. On CPython 3.11 the frames are
// read from the interpreter's own frame records (_PyInterpreterFrame), which the public API would
// first turn into frame objects (one allocation per Python call that runs an op).
//
// Each (code object, offset) pair is a call site, cached: the first time one is seen its text
// (file:line in function) is made and kept, its code object retained (so its address is never
// reused by another code object: two different sites never compare equal, the same site compares
// equal on every step); after that, a site costs one compare in a small direct-mapped cache. The
// text names the user's line in errors the GraphRunner computes and in TERRA_EXPLAIN, from any
// thread and without the GIL (trace::set_frame_describer).
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

#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "binding.h"
#include "terra/trace/location.h"
#include "terra/trace/frame_walk.h"

namespace terra::python {
namespace {
// The frame that entered the step (strong reference); frames above it are outside the step.
thread_local PyObject* g_step_frame = nullptr;
// The step thread's own thread state, taken when the step frame is set (with the GIL held): the
// GIL is held by this thread exactly when it is the interpreter's current thread state. Cheaper than
// PyGILState_Check (a pthread TLS lookup) on every op.
thread_local PyThreadState* g_step_tstate = nullptr;
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
  for (int skip = 0; skip < 3 && fp; ++skip) fp = reinterpret_cast<uintptr_t*>(fp[0]);
  const auto* base = to_interpreter ? nullptr : static_cast<const uintptr_t*>(trace::step_base());
  trace::walk_frames(fp, base, kMaxCppFrames, out.frames,
                     [&](uintptr_t ret) { return to_interpreter && in_interpreter(ret); });
}

// Code objects that appear in locations, retained (strong references) so their addresses stay
// unique for the life of the process. Only touched with the GIL held.
std::unordered_set<PyObject*>* g_codes = nullptr;

// Call sites: every (code object, instruction offset) pair seen in a location, with its text
// ("file:line in function") made once, when first seen (with the GIL held). Errors the GraphRunner
// computes and TERRA_EXPLAIN then name the user's Python line from any thread, without the GIL.
// The front cache makes a site seen before (every op call in a steady loop) one compare.
struct SiteKey {
  uintptr_t code, off;
  bool operator==(const SiteKey& o) const { return code == o.code && off == o.off; }
};
struct SiteHash {
  size_t operator()(const SiteKey& k) const { return size_t((k.code >> 4) * 0x9E3779B97F4A7C15ull ^ k.off); }
};
std::mutex g_sites_mu;  // the host inserts; the runner (errors) and explain read
std::unordered_map<SiteKey, std::string, SiteHash>* g_sites = nullptr;  // never freed: outlives finalization
SiteKey g_site_cache[256] = {};  // direct-mapped front of g_sites; GIL held

std::string utf8(PyObject* s) {
  const char* p = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : nullptr;
  return p ? p : "?";
}

std::string site_text(PyObject* code, uintptr_t off) {
  auto* co = reinterpret_cast<PyCodeObject*>(code);
  PyObject *type, *value, *tb;  // whatever is pending stays pending
  PyErr_Fetch(&type, &value, &tb);
  std::string text = utf8(co->co_filename) + ":" + std::to_string(PyCode_Addr2Line(co, int(off))) + " in " +
                     utf8(co->co_qualname);
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
  return text;
}

__attribute__((noinline)) void note_site_slow(PyObject* code, uintptr_t off) {
  SiteKey key{reinterpret_cast<uintptr_t>(code), off};
  {
    std::lock_guard<std::mutex> g(g_sites_mu);
    if (g_sites && g_sites->count(key)) return;
  }
  std::string text = site_text(code, off);  // Python API calls: not under the lock
  std::lock_guard<std::mutex> g(g_sites_mu);
  if (!g_sites) g_sites = new std::unordered_map<SiteKey, std::string, SiteHash>();
  if (!g_codes) g_codes = new std::unordered_set<PyObject*>();
  if (g_sites->try_emplace(key, std::move(text)).second && g_codes->insert(code).second) Py_INCREF(code);
}

inline void note_site(PyObject* code, uintptr_t off) {
  uintptr_t c = reinterpret_cast<uintptr_t>(code);
  SiteKey& slot = g_site_cache[SiteHash{}(SiteKey{c, off}) >> 3 & 255];
  if (slot.code == c && slot.off == off) return;
  note_site_slow(code, off);
  slot = {c, off};
}

// Installed as trace's frame describer: the text of a site seen before, "" for any other pair.
std::string describe_site(uintptr_t code, uintptr_t off) {
  std::lock_guard<std::mutex> g(g_sites_mu);
  if (!g_sites) return "";
  auto it = g_sites->find(SiteKey{code, off});
  return it == g_sites->end() ? "" : it->second;
}

#if TERRA_PY_IFRAME
thread_local _PyInterpreterFrame* g_step_iframe = nullptr;  // the step frame's interpreter record

// The Python frames of `ts`, innermost first, up to and including the step's frame: visit(code,
// byte offset as PyFrame_GetLasti gives it) for each, until it returns false. The GIL is held.
template <class Visit>
void visit_python_frames(PyThreadState* ts, Visit&& visit) {
  for (_PyInterpreterFrame* f = ts->cframe->current_frame; f; f = f->previous) {
    if (_PyFrame_IsIncomplete(f)) continue;  // a frame still being set up (as PyFrame_GetBack skips)
    const uintptr_t off = uintptr_t(uint32_t(_PyInterpreterFrame_LASTI(f) * int(sizeof(_Py_CODEUNIT))));
    if (!visit(reinterpret_cast<PyObject*>(f->f_code), off) || f == g_step_iframe) return;
  }
}

void append_python_frames(std::vector<uintptr_t>& out) {
  visit_python_frames(g_step_tstate ? g_step_tstate : PyThreadState_Get(), [&](PyObject* code, uintptr_t off) {
    note_site(code, off);
    out.push_back(reinterpret_cast<uintptr_t>(code));
    out.push_back(off);
    return true;
  });
}
#else
void append_python_frames(std::vector<uintptr_t>& out) {
  PyFrameObject* f = PyEval_GetFrame();  // borrowed; the innermost Python frame (the op's caller)
  if (!f) return;
  Py_INCREF(f);
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    uintptr_t off = uintptr_t(uint32_t(PyFrame_GetLasti(f)));
    note_site(reinterpret_cast<PyObject*>(code), off);
    out.push_back(reinterpret_cast<uintptr_t>(code));
    out.push_back(off);
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

// "file:line in function" of one (code, offset) pair; only for sites seen in a location (any other
// address may be stale).
std::string describe_frame(uintptr_t code, uintptr_t lasti) {
  std::string text = describe_site(code, lasti);
  return text.empty() ? "<unknown code>" : text;
}

// Installed as trace's LocationProvider while a Python step is active. The step's thread may have
// released the GIL (a fetch waiting for the runner); an op it then runs (a fallback replaying the
// step) takes the GIL back for the walk, so its location is the one the same call has with the GIL
// held. Other threads (the runner) have no step frame: the C++ walk alone, as without the binding.
void provider(trace::Location& out) {
  bool python = g_step_frame != nullptr;
  bool ensure = python && _PyThreadState_UncheckedGet() != g_step_tstate;
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

// provider's location compared with `expected` instead of captured (trace::location_is): the C++
// part frame by frame, then the Python pairs. Called from trace::location_is, one frame less deep
// than cpp_frames. False where it cannot compare cheaply (without the GIL, or before 3.11).
__attribute__((noinline)) bool matcher(const trace::Location& expected, int skip) {
  const bool python = g_step_frame != nullptr;
  if (python && _PyThreadState_UncheckedGet() != g_step_tstate) return false;
  auto* fp = static_cast<uintptr_t*>(__builtin_frame_address(0));
  for (int k = 0; k < 2 && fp; ++k) fp = reinterpret_cast<uintptr_t*>(fp[0]);
  const uintptr_t* e = expected.frames.data();
  const size_t size = expected.frames.size();
  if (!python)
    return trace::walk_matches(fp, static_cast<const uintptr_t*>(trace::step_base()), kMaxCppFrames, e, size,
                               [](uintptr_t) { return false; }, size_t(skip)) == ptrdiff_t(size);
  const ptrdiff_t cpp = trace::walk_matches(fp, nullptr, kMaxCppFrames, e, size, &in_interpreter, size_t(skip));
  if (cpp < 0) return false;
#if TERRA_PY_IFRAME
  size_t i = size_t(cpp) + 1;  // past the 0
  if (i > size) return false;
  bool same = true;
  visit_python_frames(g_step_tstate, [&](PyObject* code, uintptr_t off) {
    same = size - i >= 2 && e[i] == reinterpret_cast<uintptr_t>(code) && e[i + 1] == off;
    i += 2;
    return same;
  });
  return same && i == size;
#else
  return false;
#endif
}
}  // namespace

void set_step_frame(PyObject* frame) {
  Py_XINCREF(frame);
  PyObject* old = g_step_frame;
  g_step_frame = frame;
  g_step_tstate = frame ? PyThreadState_Get() : nullptr;
#if TERRA_PY_IFRAME
  g_step_iframe = frame ? reinterpret_cast<PyFrameObject*>(frame)->f_frame : nullptr;
#endif
  Py_XDECREF(old);
  trace::set_location_provider(frame ? &provider : nullptr, &matcher);
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
  trace::set_frame_describer(&describe_site);
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
  m.def("_full_location", [](py::object expected) -> py::object {
    trace::Location loc;
    if (expected.is_none()) {
      trace::capture_location(loc);
      return py::make_tuple(loc.hash, std::vector<uint64_t>(loc.frames.begin(), loc.frames.end()));
    }
    auto frames = expected.cast<py::tuple>()[1].cast<std::vector<uint64_t>>();
    loc.frames.assign(frames.begin(), frames.end());
    return py::bool_(trace::location_is(loc));  // from this frame, as the capture above
  }, py::arg("expected") = py::none(),
        "(hash, frames) as the tracer records them for an op called here; given one, whether the "
        "location here is that one, compared in place as the co-executing host does.");
  m.def("_set_step_frame", [](py::object frame) { set_step_frame(frame.is_none() ? nullptr : frame.ptr()); },
        py::arg("frame"), "Marks the frame that entered a step (None clears).");
}

}  // namespace terra::python
