// The host side of co-execution (Terra §4.1): a tracing phase that runs ops eagerly and records
// traces, and a co-execution phase where the program runs as a skeleton — ops only infer shapes,
// are matched against the TraceGraph, and return placeholders — while the GraphRunner computes.
// A call the graph does not hold makes the step fall back to tracing, invisibly.
#pragma once
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "terra/core/dispatch.h"
#include "terra/graph/symbolic_graph.h"
#include "terra/runtime/engine.h"
#include "terra/runtime/graph_runner.h"
#include "terra/runtime/ring_model.h"
#include "terra/trace/trace_graph.h"

namespace terra::runtime {

struct SkelPending;  // a skeleton placeholder's value (skel_pending.h)

class CoExecSession {
 public:
  explicit CoExecSession(Stats& stats);
  ~CoExecSession();
  void begin_step();
  void end_step();
  void abort_step();  // an exception escaped the step: variables stay at exactly the eager state
  void sync_all();    // waits until the runner has executed everything sent to it
  void sync_for_eager();  // what an eager op outside this session's steps must wait for
  void synchronize();  // sync_all, then raises the first runner error the program has not seen
  void close_quietly() noexcept;  // the engine is going away: sync, report unseen errors on stderr
  void set_explain(const std::string& dir) {
    explain_dir_ = dir;
    runner_->set_explain(dir);
  }

  const trace::TraceGraph& trace_graph() const { return tg_; }
  const graph::SymbolicGraph* symbolic_graph() const { return sg_.get(); }

 private:
  enum class Phase { Idle, Tracing, CoExec, Disabled };
  struct Hist {  // one validated op of the current step; its inputs are hist_inputs_[first, first+count)
    uint32_t node, exec;
    uint32_t first, count;
  };
  class TracingExec;
  class SkeletonExec;
  class IdleExec;

  TensorList trace_call(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                        const TensorMetas& meta, PhiloxKey rng, const trace::Location& loc);
  struct Known {  // the node a call is, already checked (Cursor::predict, trace::location_is)
    trace::Node* node = nullptr;
    bool iterate = false;
  };
  // Per TraceGraph node: the outputs' metas of its last skeleton call and the inputs' they were
  // inferred from (SkeletonExec::known_outputs hands them to dispatch for inputs shaped the same).
  struct KnownMetas {
    const OpDef* op = nullptr;  // (a node's op and attributes never change; the op guards a reset graph)
    TensorMetas in, out;
  };
  // Sized when a graph is generated, between steps: an entry a call reads never moves.
  std::vector<KnownMetas> known_metas_;
  const TensorMetas* known_metas(uint32_t node, const OpDef& op, std::span<const Tensor> in) const;
  void keep_metas(uint32_t node, const OpDef& op, std::span<const Tensor> in, const TensorMetas& out);
  // Matches the call at `loc` unless `known` says which node it is.
  TensorList skeleton_call(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                           const TensorMetas& meta, PhiloxKey rng, const trace::Location& loc, Known known);
  void on_fetch(const Tensor& t);
  void fall_back(const std::string& why);
  struct RegionState {  // a region instance the walk is in, and its next undecided switch
    uint32_t key, next;
    const std::vector<uint32_t>* switches;  // sg_->region_switches[key], looked up once per region
    bool quiet;  // none of them needs a Case Select: its edges and iterations send nothing
  };
  RegionState region_state(uint32_t key) const;
  void send_events();
  void push_choice(uint32_t sw, uint32_t value);
  void push_loop_exit(const trace::Node* loop);
  void skip_until(RegionState& r, uint32_t upto);
  void sync_validated();
  void regenerate();
  void finish_trace();
  void explain(const std::string& what);
  void sync_other_sessions();  // engines of this thread: two may train the same parameters
  bool value_writes_pending() const;  // a step with an in-place write into a graph value is unfinished
  bool thread_value_writes_pending() const;  // the same, for any session of this thread
  void note_value_write();  // the step sends an in-place write into one of its own values
  void install(Executor* e);  // replaces this session's entry on its thread's executor stack
  // Raises the error of the oldest finished step that failed and was not raised yet; `wait`
  // first waits for every step sent to the runner.
  void raise_pending(bool wait);
  void note_growth(bool extended);  // gives co-execution up when the TraceGraph never converges
  void settle_kept_placeholders();  // see kept_

  Stats& stats_;
  trace::TraceGraph tg_;
  std::shared_ptr<const graph::SymbolicGraph> sg_;
  std::unique_ptr<GraphRunner> runner_;
  std::unique_ptr<TracingExec> tracing_;
  std::unique_ptr<SkeletonExec> skeleton_;
  std::unique_ptr<IdleExec> idle_;
  std::shared_ptr<ExecutorStack> stack_;  // of the thread that created the session
  Executor* installed_ = nullptr;
  std::deque<std::shared_ptr<StepState>> inflight_;  // co-executed steps whose errors are unchecked
  // Placeholders a program keeps past their step (a loss kept for logging, a value read next step)
  // must not keep the whole step's state: once the step finished they take their value (settled)
  // and, when no feed sent earlier can still read their slot, let the step go (released).
  // A step's positions [begin, end) whose live placeholders are found on their slots' lists.
  struct Kept {
    std::shared_ptr<StepState> st;
    uint64_t begin = 0, end = 0;
    uint64_t release_after = 0;  // settled: released once the runner finished this many steps
    bool settled = false;
  };
  // f(slot) for each position of k with live placeholders (f takes the slot's mu).
  template <class F>
  static void each_kept_slot(const Kept& k, F&& f);
  uint64_t kept_uid_ = 0, kept_end_ = 0;  // st_'s positions already in kept_ (by its uid)
  std::vector<uint32_t> released_outs_;  // settle_kept_placeholders' scratch
  std::deque<Kept> kept_;
  uint64_t growth_bits_ = 0;  // last 64 steps: 1 = the step's trace extended the TraceGraph

  Phase phase_ = Phase::Idle;
  bool converged_ = false;
  bool disabled_ = false;  // co-execution given up (see note_growth)  // tracing found the graph covering the latest trace
  uint64_t step_uid_ = 0;  // this step's uid, unique in the process (begin_step)
  uint64_t step_first_id_ = 0;  // tensors with smaller ids existed before the step
  uint64_t steps_sent_ = 0;  // steps handed to the runner
  uint64_t value_write_steps_ = 0;  // steps_sent_ when the last in-place write into a graph value was sent
  bool value_writer_ = false;       // counted in g_value_writers (coexec.cpp)
  // current step
  trace::Trace trace_;
  std::unique_ptr<trace::Cursor> cursor_;
  std::vector<trace::Cursor::Event> events_;
  std::vector<RegionState> regions_;
  std::vector<uint8_t> edge_choices_;  // per trace node id of sg_: 1 if an edge from it decides switches
  bool edge_may_decide(const trace::Node* from) const {
    return from->id >= edge_choices_.size() || edge_choices_[from->id];
  }
  // An edge from `from` into an op tells the runner nothing: it decides no switch, or the current
  // region's switches need no Case Select.
  bool edge_is_silent(const trace::Node* from) const { return regions_.back().quiet || !edge_may_decide(from); }
  std::vector<Hist> hist_;
  std::vector<trace::RecordSource> hist_inputs_;  // one flat array: no allocation per op
  trace::Location loc_;                           // reused by every call (keeps its capacity)
  std::vector<FeedValue> feeds_;                  // the Validate message being built
  std::vector<uint32_t> phi_;
  std::vector<PhiChoices> phi_last_;  // per node id: the last choices sent (the runner's mirror)
  std::shared_ptr<StepState> st_;
  uint64_t seq_ = 0;
  bool fell_back_ = false;
  bool host_kernels_ = false;  // this host runs kernels itself (tracing): its runner sleeps, workers unpinned
  void host_runs_kernels(bool on);
  std::chrono::steady_clock::time_point t0_;
  double stall0_ = 0;  // host stall accumulated before this step began
  std::string explain_dir_;
  // Debug builds only (NDEBUG undefined): the protocol check and the sources the host matched.
  RingModel ring_model_;
  std::vector<trace::Source> got_;
};

}  // namespace terra::runtime
