// terra.Engine("coexec" | "eager" | "lazy"): `with engine.step(): ...` and engine.stats().
#include <Python.h>

#include <optional>

#include <terra/runtime/engine.h>

#include "binding.h"

namespace terra::python {
namespace {

// The object `engine.step()` returns; the C++ Step lives from __enter__ to __exit__.
class StepContext {
 public:
  explicit StepContext(Engine* e) : engine_(e) {}
  ~StepContext() {
    if (step_) {
      try {
        abandon();
      } catch (...) {
      }
    }
  }
  void enter() {
    if (step_) throw std::invalid_argument("[Engine] this step was already entered");
    PyObject* frame = reinterpret_cast<PyObject*>(PyEval_GetFrame());  // the frame running `with`
    set_step_frame(frame);
    try {
      step_.emplace(engine_->step());
    } catch (...) {
      set_step_frame(nullptr);
      throw;
    }
  }
  // Normal exit: the step commits (co-execution checks and syncs here; errors surface as Python
  // exceptions). Exceptional exit: the step is abandoned, variables go back to the step's start.
  void exit(bool exception) {
    if (!step_) return;
    struct ClearFrame {
      ~ClearFrame() { set_step_frame(nullptr); }
    } clear;
    if (exception) {
      abandon();
    } else {
      std::optional<Step> s = std::move(step_);
      step_.reset();
      py::gil_scoped_release release;  // the end may wait for the runner (ops it runs take the GIL back)
      s->end();
    }
  }
  bool active() const { return step_.has_value(); }

 private:
  // Step's public API ends a step as abandoned only when it is destroyed during stack unwinding
  // (std::uncaught_exceptions); unwind through a local to get exactly that path.
  void abandon() {
    struct Destroy {
      std::optional<Step>& s;
      ~Destroy() { s.reset(); }
    };
    try {
      Destroy d{step_};
      throw 0;
    } catch (int) {
    }
  }
  Engine* engine_;
  std::optional<Step> step_;
};

Mode mode_from_string(const std::string& s) {
  if (s == "coexecution" || s == "co-execution" || s == "terra") return Mode::CoExecution;
  return parse_mode(s);  // "eager" | "coexec" | "lazy"; throws invalid_argument
}

}  // namespace

void bind_engine(py::module_& m) {
  py::enum_<Mode>(m, "Mode")
      .value("Eager", Mode::Eager)
      .value("CoExecution", Mode::CoExecution)
      .value("Lazy", Mode::Lazy);
  py::class_<StepContext>(m, "Step")
      .def("__enter__", [](StepContext& s) -> StepContext& { s.enter(); return s; },
           py::return_value_policy::reference)
      .def("__exit__", [](StepContext& s, py::object type, py::object, py::object) {
        s.exit(!type.is_none());
        return false;
      })
      .def_property_readonly("active", &StepContext::active);
  py::class_<Engine>(m, "Engine")
      .def(py::init([](py::object mode) {
        if (py::isinstance<Mode>(mode)) return std::make_unique<Engine>(mode.cast<Mode>());
        return std::make_unique<Engine>(mode_from_string(mode.cast<std::string>()));
      }), py::arg("mode") = "coexec")
      .def("step", [](Engine& e) { return std::make_unique<StepContext>(&e); }, py::keep_alive<0, 1>(),
           "Use as `with engine.step(): ...`: one training iteration.")
      .def("stats", [](const Engine& e) {
        Stats s = e.stats();
        py::dict d;
        d["steps"] = s.steps;
        d["traces"] = s.traces;
        d["fallbacks"] = s.fallbacks;
        d["graph_generations"] = s.graph_generations;
        d["host_busy_s"] = s.host_busy_s;
        d["host_stall_s"] = s.host_stall_s;
        d["runner_busy_s"] = s.runner_busy_s;
        d["runner_stall_s"] = s.runner_stall_s;
        d["runner_cpu_s"] = s.runner_cpu_s;
        d["fused_kernels"] = s.fused_kernels;
        d["fused_ops"] = s.fused_ops;
        d["side_heavy_ops"] = s.side_heavy_ops;
        d["side_ops"] = s.side_ops;
        d["messages"] = s.messages;
        d["predicted_calls"] = s.predicted_calls;
        d["lazy_cache_hits"] = s.lazy_cache_hits;
        d["lazy_cache_misses"] = s.lazy_cache_misses;
        d["coexec_disabled"] = s.coexec_disabled;
        return d;
      })
      .def_property_readonly("mode", [](const Engine& e) { return std::string(mode_name(e.mode())); })
      .def("synchronize", &Engine::synchronize, py::call_guard<py::gil_scoped_release>(),
           "Waits for queued work and raises the first error computed in the graph that was not raised yet.")
      .def("close", &Engine::close, py::call_guard<py::gil_scoped_release>(), "synchronize(); an error never raised is reported on stderr at destruction instead")
      .def("__enter__", [](Engine& e) -> Engine& { return e; }, py::return_value_policy::reference)
      .def("__exit__", [](Engine& e, py::object type, py::object, py::object) {
        if (type.is_none()) {
          py::gil_scoped_release release;
          e.close();
        }  // `with terra.Engine(...) as eng:` raises unseen errors at its end
        return false;
      })
      .def("set_explain", &Engine::set_explain, py::arg("dir"));
}

}  // namespace terra::python
