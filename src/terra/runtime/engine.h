// Engine: runs a training program's steps eagerly, lazily (LazyTensor), or by imperative-symbolic
// co-execution (Terra). Switching the Mode is the only change a program makes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace terra {
namespace runtime {
class CoExecSession;
}

enum class Mode { Eager, CoExecution, Lazy };
const char* mode_name(Mode m);
Mode parse_mode(const std::string& s);  // "eager" | "coexec" | "lazy"; throws invalid_argument

struct Stats {
  int64_t steps = 0;
  int64_t traces = 0;             // steps (or step remainders) run in tracing phase
  int64_t fallbacks = 0;          // co-execution steps that fell back to tracing
  int64_t graph_generations = 0;  // symbolic graphs generated
  double host_busy_s = 0, host_stall_s = 0;      // host thread: running the program / waiting on fetches
  double runner_busy_s = 0, runner_stall_s = 0;  // GraphRunner: executing / waiting for feeds and choices
  double runner_cpu_s = 0;  // GraphRunner thread's CPU time (its spinning waits included; not disturbed by load)
  // Compiled execution (co-execution's runner): fused elementwise kernels run, and the ops they replaced.
  int64_t fused_kernels = 0, fused_ops = 0;
  // Heavy ops the runner handed to a spare core, and the ops it ran itself meanwhile (side by side).
  int64_t side_heavy_ops = 0, side_ops = 0;
  // Co-execution: messages the host sent the runner (validations, case selects, loop exits, step
  // markers). Ops whose inputs and path the runner already knows need none.
  int64_t messages = 0;
  // Co-execution: op calls the host recognized as the call the graph predicts by comparing their
  // location frame by frame (no capture, no search among the graph's successors).
  int64_t predicted_calls = 0;
  int64_t lazy_cache_hits = 0, lazy_cache_misses = 0;  // Lazy mode's compiled-block cache
  // Co-execution stopped for this engine: its TraceGraph kept growing without converging (every
  // later step runs eagerly; TERRA_EXPLAIN says why).
  bool coexec_disabled = false;
};

class Engine;
class EngineImpl;

// One iteration of the training loop: lasts until the object dies (RAII).
class Step {
 public:
  Step(Step&& o) noexcept;
  Step& operator=(Step&&) = delete;
  ~Step() noexcept(false);
  void end();    // ends the step early (idempotent)
  void abort();  // ends it as an exception escaping it would: nothing more is recorded from it

 private:
  friend class Engine;
  explicit Step(std::shared_ptr<EngineImpl> e);
  std::shared_ptr<EngineImpl> engine_;  // a step keeps its engine's state alive (any destruction order)
  int uncaught_;
};

class Engine {
 public:
  explicit Engine(Mode mode);
  ~Engine();
  // Waits for the runner and raises an error it computed that the program has not seen yet (a
  // destructor cannot raise: ~Engine reports such an error on stderr instead).
  void close();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The caller's frame bounds the locations recorded in the step (no annotations needed).
  __attribute__((noinline)) Step step();
  Stats stats() const;
  Mode mode() const;
  // Waits until every queued op ran (co-execution) / pending work is evaluated (lazy), and raises
  // the first error the runner computed that the program has not seen yet.
  void synchronize();
  // Prints why each fallback happened and dumps graphs as Graphviz DOT into `dir` ("" = off).
  // The environment variable TERRA_EXPLAIN=dir does the same for every engine.
  void set_explain(const std::string& dir);
  EngineImpl* impl() const { return impl_.get(); }
  // The co-execution session (TraceGraph, symbolic graph) for tools and tests; null in other modes.
  const runtime::CoExecSession* coexec() const;

 private:
  std::shared_ptr<EngineImpl> impl_;
};

}  // namespace terra
