#include "terra/runtime/coexec.h"

#include "terra/core/object_pool.h"
#include "terra/core/threads.h"
#include "terra/core/wait.h"
#include "terra/runtime/lend_core.h"
#include "terra/runtime/placeholder.h"
#include "terra/runtime/skel_pending.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace terra::runtime {

using Clock = std::chrono::steady_clock;
static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Host time spent waiting for the runner, on this thread (placeholders wait too, possibly after
// their engine is gone, so this is not a member of the session).
static thread_local double t_stall = 0;

void wait_step(StepState& st, uint64_t n) {
  if (st.done.load() >= n) return;
  st.flush_host_drops();  // the runner may free what the host dropped while it waits
  auto t = Clock::now();
  HostWaiting blocked(st.host_waiting.get());
  // Say so first: a runner holding validated ops of a fused segment runs them now, and the runner
  // signals once it reaches n. Another thread may be waiting on this step too (it reads a value
  // of it): the lowest target stands until the last of them leaves, else one leaving would
  // withdraw the other's request and the runner would hold its ops for a host that sleeps.
  struct Waiter {
    StepState& st;
    Waiter(StepState& s, uint64_t n) : st(s) {
      std::lock_guard<std::mutex> g(st.mu);
      if (st.waiters++ == 0 || n < st.host_waits_for.load()) st.host_waits_for.store(n);
      if (!st.finished && st.runner) st.runner->notify();  // alive: the runner has not finished this step
    }
    ~Waiter() {
      std::lock_guard<std::mutex> g(st.mu);
      if (--st.waiters == 0) st.host_waits_for.store(~0ull);
    }
  };
  {
    const Waiter waiting(st, n);
    // Before sleeping, the host lends its core to the runner's loops (lend_core.h), or with one
    // thread spins a little (yielding): the runner is usually a few ops away, and a sleeping host
    // wakes tens of microseconds late.
    auto ready = [&] { return st.done.load(std::memory_order_acquire) >= n || st.finished.load(std::memory_order_acquire); };
    if (num_threads() > 1) lend_core_while(ready);
    else spin_until(ready, 64);
    // The runner stores `done` with only a compiler fence where membarrier works (advance): make
    // it fence now, so that either the check below sees its store or its next load sees
    // host_waits_for and it notifies. If the kernel refuses, sleep a millisecond at a time.
    const bool fenced = !heavy_barrier_available() || heavy_barrier();
    auto reached = [&] { return st.done.load() >= n || st.finished; };
    std::unique_lock<std::mutex> g(st.mu);
    if (fenced) st.cv.wait(g, reached);
    else
      while (!reached()) st.cv.wait_for(g, std::chrono::milliseconds(1));
  }  // (g unlocks before ~Waiter locks mu)
  t_stall += since(t);
  if (st.done.load() < n)
    if (auto err = st.error_before(n)) {
      // Raised on another thread, the error still reaches the host's program at the step's end,
      // and only the host's own numbers go back (its generator and key list are its own).
      if (st.on_host_thread()) {
        st.error_raised = true;
        if (!st.host_ended) st.rewind_random();  // still inside that step: nothing later drew numbers
      }
      std::rethrow_exception(err);
    }
}

class CoExecSession::TracingExec : public Executor {
 public:
  explicit TracingExec(CoExecSession& s) : s_(s) {}
  TensorList run(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                 const TensorMetas& meta, PhiloxKey rng) override {
    trace::Location loc;
    trace::capture_location(loc);
    return s_.trace_call(op, in, attrs, meta, rng, loc);
  }
  void on_fetch(const Tensor& t) override {
    TensorImpl* i = t.impl();
    if (i->trace_step == s_.step_uid_ && i->trace_rec < s_.trace_.records.size())
      s_.trace_.records[i->trace_rec].fetched[i->trace_out] = true;
  }

 private:
  CoExecSession& s_;
};

class CoExecSession::SkeletonExec : public Executor {
 public:
  explicit SkeletonExec(CoExecSession& s) : s_(s) {}
  // The call the graph predicts here, if its location is that node's: compared frame by frame,
  // never captured or hashed (the usual call of a known path). Asked before inference: with the
  // inputs shaped as at the node's last call, its outputs' metas are that call's.
  const TensorMetas* known_outputs(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs) override {
    bool iterate = false;
    trace::Node* n = s_.cursor_->predict(&op, attrs, in.size(), &iterate);
    if (n && !trace::location_is(n->loc, 1)) n = nullptr;  // (called from dispatch, one site before run)
    call_ = {&op, in.data(), n, iterate, nullptr};
    // A view's inference also checks strides and offsets: it runs every time.
    if (n && !op.has(kView) && !op.has(kInplace)) call_.metas = s_.known_metas(n->id, op, in);
    return call_.metas;
  }
  TensorList run(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                 const TensorMetas& meta, PhiloxKey rng) override {
    // What known_outputs found, if dispatch asked it for this very call (it always does); any other
    // call is matched by its captured location.
    Call c = std::exchange(call_, Call{});
    if (c.op != &op || c.in != in.data()) c = Call{};
    if (!c.node) {
      trace::capture_location(s_.loc_);  // here, at the same depth as TracingExec::run captures
      return s_.skeleton_call(op, in, attrs, meta, rng, s_.loc_, {});
    }
    if (!c.metas && !op.has(kView) && !op.has(kInplace)) s_.keep_metas(c.node->id, op, in, meta);
    return s_.skeleton_call(op, in, attrs, meta, rng, c.node->loc, {c.node, c.iterate});
  }
  void on_fetch(const Tensor& t) override { s_.on_fetch(t); }

 private:
  CoExecSession& s_;
  struct Call {  // what known_outputs found for the call dispatch runs next
    const OpDef* op = nullptr;
    const Tensor* in = nullptr;
    trace::Node* node = nullptr;  // predicted, its location checked
    bool iterate = false;
    const TensorMetas* metas = nullptr;  // the node's kept metas, handed to dispatch
  };
  Call call_;
};

const TensorMetas* CoExecSession::known_metas(uint32_t node, const OpDef& op, std::span<const Tensor> in) const {
  if (node >= known_metas_.size()) return nullptr;
  const KnownMetas& k = known_metas_[node];
  return k.op == &op && metas_match(k.in, in) ? &k.out : nullptr;
}

void CoExecSession::keep_metas(uint32_t node, const OpDef& op, std::span<const Tensor> in, const TensorMetas& out) {
  if (node >= known_metas_.size()) return;  // a node newer than the graph: its calls infer
  KnownMetas& k = known_metas_[node];
  k.op = &op;
  record_metas(k.in, in);
  k.out = out;
}

// Live sessions: an eager op between steps may read variables any of them is still updating.
static std::mutex g_sessions_mu;
static std::vector<CoExecSession*> g_sessions;
// Sessions that ever sent an in-place write into a graph value (value_write_steps_ > 0), rare.
static std::atomic<int> g_value_writers{0};

// A tensor a graph owes (or owed) an in-place write: its bytes are final only once every runner
// finished what was sent to it. Memory NumPy may write (Storage::foreign; Python's Tensor.numpy()
// marks it before its fetch): ops called before the read must have read it first. Other
// placeholders wait for their own op when read (materialize).
static bool graph_may_write(const Tensor& t) {
  const TensorImpl* i = t.impl();
  if (!i) return false;
  auto g = lock_if_awaiting(*i);  // a placeholder another thread may be reading first
  return i->storage &&
         (i->storage->deferred_write.load(std::memory_order_relaxed) || i->storage->foreign.load(std::memory_order_relaxed));
}

// Between steps: anything the program runs sees the runners' results first (every engine's:
// two engines may train the same parameters). A read of values no graph writes in place (the
// step's loss reduced and fetched after it) waits only for those values, so the host goes on to
// the next step while the runner still computes the backward pass and the update.
class CoExecSession::IdleExec : public Executor {
 public:
  explicit IdleExec(CoExecSession& s) : s_(s) {}
  TensorList run(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                 const TensorMetas& meta, PhiloxKey rng) override {
    // In-place writes may race a runner still reading their target; stateful and random ops keep
    // their order with the runners' effects (the generator a late error rewinds).
    bool sync = op.has(kInplace) || op.has(kStateful) || op.has(kRandom);
    for (size_t i = 0; i < in.size() && !sync; ++i) sync = graph_may_write(in[i]);
    sync = sync || s_.thread_value_writes_pending();
    if (sync) {
      s_.sync_all();
      s_.sync_other_sessions();
    }
    return execute_eager(op, in, attrs, meta, rng);
  }
  // A runner error the fetched value does not depend on is raised at a later step's end (or
  // synchronize()), not here: the contract's "next synchronization point" for it.
  void on_fetch(const Tensor& t) override {
    if (!graph_may_write(t) && !s_.thread_value_writes_pending()) return;
    s_.raise_pending(true);
    s_.sync_other_sessions();
  }

 private:
  CoExecSession& s_;
};

CoExecSession::CoExecSession(Stats& stats)
    : stats_(stats),
      runner_(std::make_unique<GraphRunner>()),
      tracing_(std::make_unique<TracingExec>(*this)),
      skeleton_(std::make_unique<SkeletonExec>(*this)),
      idle_(std::make_unique<IdleExec>(*this)),
      stack_(ExecutorStack::of_this_thread()) {
  install(idle_.get());
  std::lock_guard<std::mutex> g(g_sessions_mu);
  g_sessions.push_back(this);
}

CoExecSession::~CoExecSession() {
  {
    std::lock_guard<std::mutex> g(g_sessions_mu);
    g_sessions.erase(std::find(g_sessions.begin(), g_sessions.end(), this));
  }
  if (value_writer_) g_value_writers.fetch_sub(1, std::memory_order_relaxed);
  close_quietly();
  host_runs_kernels(false);
  stack_->remove(installed_);
}

// Tracing, the host runs every kernel while its runner has nothing to do: the runner sleeps at
// once when it runs dry (no spinning on a core the host's loops need) and pool workers give up
// their CPUs (core/threads.h, unpin_workers), until the host co-executes again.
void CoExecSession::host_runs_kernels(bool on) {
  if (on == host_kernels_) return;
  host_kernels_ = on;
  runner_->channel().expect_quiet(on);
  unpin_workers(on);
}

void CoExecSession::sync_other_sessions() {
  // Only this thread's sessions, chosen under the lock: a session of another thread may be being
  // destroyed there right now (its stack_ must not even be read after the lock is released).
  std::vector<CoExecSession*> others;
  {
    std::lock_guard<std::mutex> g(g_sessions_mu);
    for (CoExecSession* o : g_sessions)
      if (o != this && o->stack_ == stack_) others.push_back(o);
  }
  for (CoExecSession* o : others) o->sync_for_eager();
}

bool CoExecSession::value_writes_pending() const { return runner_->steps_finished() < value_write_steps_; }

// A placeholder materialized on the host points at the runner's storage, while an alias made
// before (a view, a detach) still holds the placeholder's storage object: an in-place write
// through the alias marks only the latter. Such writes (into a value the graph has not handed
// over) make every read wait for the steps that hold them, in this session or another of this thread.
bool CoExecSession::thread_value_writes_pending() const {
  if (value_writes_pending()) return true;
  // Every eager op beside an idle session asks this: skip the lock while no session ever sent
  // such a write (a session of this thread counts itself here before its first one).
  if (g_value_writers.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> g(g_sessions_mu);
  for (CoExecSession* o : g_sessions)
    if (o != this && o->stack_ == stack_ && o->value_writes_pending()) return true;
  return false;
}

// An in-place write into a value of this step, sent to the runner: reads wait for it to finish.
void CoExecSession::note_value_write() {
  if (!value_writer_) g_value_writers.fetch_add(1, std::memory_order_relaxed);
  value_writer_ = true;
  value_write_steps_ = steps_sent_;
}

void CoExecSession::sync_for_eager() {
  if (phase_ == Phase::CoExec) sync_validated();  // mid-step (steps of two engines interleaved)
  else sync_all();
}

// The executor of an open step goes on top of the thread's stack, the idle one to the bottom: with
// two co-executing engines on one thread, the idle executor of the engine made last used to sit
// above the other's step and ran that step's calls eagerly (it never co-executed).
void CoExecSession::install(Executor* e) {
  stack_->move(installed_, e, /*top=*/e != idle_.get());
  installed_ = e;
}

void CoExecSession::raise_pending(bool wait) {
  if (wait) sync_for_eager();  // inside a step: only what the host validated
  while (!inflight_.empty()) {
    StepState& st = *inflight_.front();
    std::exception_ptr err;
    {
      std::lock_guard<std::mutex> g(st.mu);
      if (!st.finished || !st.host_ended) return;  // nor can later steps have
      if (st.error && st.error_pos < st.validated && !st.error_raised) err = st.error;
    }
    st.error_raised = true;
    if (err && &st == st_.get()) st.rewind_random();  // the step that just ended: no later one began
    st.host_reclaim();  // the runner is done with it: values dropped from now on die where they drop
    inflight_.pop_front();
    if (err) std::rethrow_exception(err);
  }
}

void CoExecSession::synchronize() {
  raise_pending(true);
  settle_kept_placeholders();  // every step sent has finished: kept values let their steps go
}

void CoExecSession::close_quietly() noexcept {
  try {
    sync_all();
    settle_kept_placeholders();
    for (;;) {
      try {
        raise_pending(false);
        break;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[terra] an error the GraphRunner computed was never seen by the program (engine destroyed "
                             "before a fetch or synchronize()): %s\n", e.what());
      }
    }
  } catch (...) {
  }
}

void CoExecSession::explain(const std::string& what) {
  if (explain_dir_.empty()) return;
  std::fprintf(stderr, "[terra explain] %s\n", what.c_str());
}

void CoExecSession::sync_all() {
  if (runner_->steps_finished() >= steps_sent_) return;
  auto t = Clock::now();
  runner_->wait_steps_finished(steps_sent_);
  t_stall += since(t);
}

void CoExecSession::sync_validated() {
  if (steps_sent_ > 0 && runner_->steps_finished() < steps_sent_ - 1) {
    auto t = Clock::now();
    runner_->wait_steps_finished(steps_sent_ - 1);
    t_stall += since(t);
  }
  if (st_) wait_step(*st_, seq_);
}

void CoExecSession::regenerate() {
  sg_ = std::make_shared<graph::SymbolicGraph>(graph::generate(tg_));
  edge_choices_.assign(tg_.num_nodes(), 0);
  known_metas_.resize(tg_.num_nodes());
  for (const auto& [key, list] : sg_->choices)
    if (!list.empty()) {
      if ((key >> 32) >= edge_choices_.size()) edge_choices_.resize((key >> 32) + 1, 0);
      edge_choices_[key >> 32] = 1;
    }
  stats_.graph_generations++;
  if (!explain_dir_.empty()) {
    std::ofstream(explain_dir_ + "/tracegraph_" + std::to_string(stats_.graph_generations) + ".dot") << tg_.dot();
    std::ofstream(explain_dir_ + "/symbolic_" + std::to_string(stats_.graph_generations) + ".dot") << sg_->dot();
    explain("generated graph " + std::to_string(stats_.graph_generations) + " (" + std::to_string(tg_.num_nodes()) +
            " trace nodes) into " + explain_dir_);
    // Which attributes the graph takes per call instead of baking them (symbolic dimensions).
    std::string sym;
    int count = 0;
    for (size_t id = 0; id < tg_.num_nodes(); ++id) {
      const trace::Node* n = tg_.node(uint32_t(id));
      if (n->kind != trace::Node::OpCall || !n->symbolic_attrs) continue;
      if (++count <= 12) sym += "\n  node " + std::to_string(id) + " " + n->op->name + ": " + n->symbolic_str();
    }
    if (count)
      explain(std::to_string(count) + " nodes take symbolic attributes per call" + sym +
              (count > 12 ? "\n  ..." : ""));
  }
}

template <class F>
void CoExecSession::each_kept_slot(const Kept& k, F&& f) {
  for (uint64_t p = k.begin; p < k.end;) {
    CellSlot* s = &k.st->host_slot(p);  // a chunk's slots are one array
    for (const uint64_t chunk_end = std::min(k.end, (p / kSlotChunk + 1) * kSlotChunk); p < chunk_end; ++p, ++s)
      if (s->placeholders.load(std::memory_order_relaxed)) f(*s);  // else none alive (none is added now)
  }
}

// Host thread, at a step's start. A kept placeholder's slot may be named by a feed the host sent
// before it settled (an alias of the slot's cell): released only once the runner finished every
// step sent by then. Feeds made after settling carry the value itself.
void CoExecSession::settle_kept_placeholders() {
  if (st_) {
    if (kept_uid_ != st_->uid) kept_uid_ = st_->uid, kept_end_ = 0;
    if (st_->host_pos_mine > kept_end_) {
      kept_.push_back({st_, kept_end_, st_->host_pos_mine});
      kept_end_ = st_->host_pos_mine;
    }
  }
  for (Kept& k : kept_) {
    if (k.settled) continue;
    {
      std::lock_guard<std::mutex> g(k.st->mu);
      if (!k.st->finished || !k.st->host_ended) break;  // steps finish in order
    }
    each_kept_slot(k, [](CellSlot& s) {
      std::lock_guard<SpinLock> g(s.mu);
      for (SlotLink* l = s.placeholders.load(std::memory_order_relaxed); l; l = l->next_in_slot)
        static_cast<SkelPending*>(l)->settle();
    });
    k.settled = true;
    k.release_after = steps_sent_;
  }
  const uint64_t finished = runner_->steps_finished();
  while (!kept_.empty() && kept_.front().settled && finished >= kept_.front().release_after) {
    const Kept& k = kept_.front();
    each_kept_slot(k, [&](CellSlot& s) {
      // Released placeholders leave the list here; the others (unsettled: their step failed, or
      // dying on another thread, which unlinks them) stay.
      released_outs_.clear();
      {
        std::lock_guard<SpinLock> g(s.mu);
        SlotLink* stay = nullptr;
        SlotLink** tail = &stay;
        for (SlotLink* l = s.placeholders.load(std::memory_order_relaxed); l;) {
          SlotLink* next = l->next_in_slot;
          uint32_t out;
          if (static_cast<SkelPending*>(l)->release(&out)) {
            released_outs_.push_back(out);
          } else {
            *tail = l;
            tail = &l->next_in_slot;
          }
          l = next;
        }
        *tail = nullptr;
        s.placeholders.store(stay, std::memory_order_relaxed);
      }
      for (uint32_t out : released_outs_) k.st->host_release_out(s, out);  // may kill the slot (its mu)
    });
    kept_.pop_front();
  }
}

void CoExecSession::begin_step() {
  settle_kept_placeholders();
  // Unique in the process, not per session: a tensor carries the uid of the step that recorded it
  // (TensorImpl::trace_step), and another engine's step with the same number would take it for one
  // of its own records (a wrong source in its TraceGraph).
  static std::atomic<uint64_t> g_step_uids{0};
  step_uid_ = g_step_uids.fetch_add(1, std::memory_order_relaxed) + 1;
  step_first_id_ = next_tensor_id();
  t0_ = Clock::now();
  stall0_ = t_stall;
  fell_back_ = false;
  seq_ = 0;
  hist_.clear();
  hist_inputs_.clear();
  trace_.records.clear();
  if (converged_ && sg_) {
    // Bounded run-ahead: at most two steps queued on the runner.
    if (steps_sent_ >= 2 && runner_->steps_finished() < steps_sent_ - 2) {
      auto t = Clock::now();
      runner_->wait_steps_finished(steps_sent_ - 2);
      t_stall += since(t);
    }
    phase_ = Phase::CoExec;
    st_ = std::make_shared<StepState>();
    st_->uid = step_uid_;
    st_->graph = sg_;
    st_->tg = &tg_;
    st_->runner = &runner_->channel();
    st_->host_waiting = runner_->host_waiting();
    inflight_.push_back(st_);
    cursor_ = std::make_unique<trace::Cursor>(tg_, true);
#ifndef NDEBUG
    ring_model_.reset(*sg_);
#endif
    regions_.assign(1, region_state(graph::SymbolicGraph::kRootRegion));
    if (phi_last_.size() < sg_->phi_predicted.size()) phi_last_.resize(sg_->phi_predicted.size());
    Message m;
    m.kind = Message::StepBegin;
    m.step = st_;
    host_runs_kernels(false);
    runner_->channel().push(std::move(m));
    steps_sent_++;
    install(skeleton_.get());
  } else {
    sync_all();
    host_runs_kernels(true);
    phase_ = disabled_ ? Phase::Disabled : Phase::Tracing;
    st_.reset();
    install(disabled_ ? static_cast<Executor*>(idle_.get()) : tracing_.get());
  }
}

void CoExecSession::on_fetch(const Tensor& t) {
  TensorImpl* i = t.impl();
  if (phase_ == Phase::CoExec) st_->validated = seq_;
  if (i->trace_step == step_uid_ && phase_ == Phase::CoExec) {
    const trace::Node* n = tg_.node(hist_[i->trace_rec].node);
    if (!n->fetched[i->trace_out]) {
      fall_back(std::string("new fetch point: output ") + std::to_string(i->trace_out) + " of " + n->label() +
                " (node " + std::to_string(n->id) + ") is read by the host for the first time");
      trace_.records[i->trace_rec].fetched[i->trace_out] = true;
      return;
    }
  }
  // A value no graph writes in place is final once its own op ran: reading it waits for that op
  // (materialize), not for every op validated since (the loss fetched after backward and the
  // update were validated: the host goes on while the runner computes them). A runner error the
  // value does not depend on is raised at the step's end, as is an earlier step's.
  if (graph_may_write(t) || thread_value_writes_pending()) sync_validated();
}

void CoExecSession::fall_back(const std::string& why) {
  stats_.fallbacks++;
  explain("fallback in step " + std::to_string(stats_.steps) + " after " + std::to_string(seq_) +
          " matched ops: " + why);
  st_->abort_at.store(seq_);
  st_->validated = seq_;
  st_->host_ended = true;
  Message m;
  m.kind = Message::Abort;
  runner_->channel().push(std::move(m));
  auto t = Clock::now();
  runner_->wait_steps_finished(steps_sent_);
  t_stall += since(t);
  host_runs_kernels(true);
  st_->host_reclaim();
  std::exception_ptr err = st_->error_before(seq_);
  if (err) {
    st_->error_raised = true;
    st_->rewind_random();
  }
  // The matched prefix becomes the start of this step's trace; the rest is traced eagerly.
  trace_.records.clear();
  for (const Hist& h : hist_) {
    const trace::Node* n = tg_.node(h.node);
    trace::Record r;
    r.op = n->op;
    r.attrs = n->attrs;
    r.loc = n->loc;
    r.inputs.assign(hist_inputs_.begin() + h.first, hist_inputs_.begin() + h.first + h.count);
    r.out_meta.assign(n->num_outputs, TensorMeta{{}, DType::Float32});
    r.fetched.assign(n->num_outputs, false);
    trace_.records.push_back(std::move(r));
  }
  phase_ = Phase::Tracing;
  fell_back_ = true;
  install(tracing_.get());
  if (err) std::rethrow_exception(err);
}

void CoExecSession::finish_trace() {
  std::string why;
  bool generalized = false;
  bool changed = tg_.merge(trace_, &why, &generalized);
  stats_.traces++;
  if (changed) explain("trace of step " + std::to_string(stats_.steps) + " extended the TraceGraph: " + why);
  note_growth(changed);
  if (disabled_) return;
  // Co-execution starts after every trace. Host data made in the step is fed from the first trace,
  // so a second trace to confirm the graph would only find what a fallback finds (what differs
  // between steps, a new path) at no lower cost: the runner computes the matched prefix.
  regenerate();
  converged_ = true;
  if (!fell_back_)
    explain("trace of step " + std::to_string(stats_.steps) +
            (!changed ? " is covered" : generalized ? " only generalized the graph" : " extended the graph") +
            ": co-execution starts");
}

void CoExecSession::end_step() {
  if (phase_ == Phase::Disabled) {
    phase_ = Phase::Idle;
    install(idle_.get());
    stats_.host_busy_s += since(t0_);
    raise_pending(false);
    return;
  }
  if (phase_ == Phase::CoExec && !cursor_->can_finish())
    fall_back("the step ended where the graph expects more ops");
  if (phase_ == Phase::CoExec) {
    st_->validated = seq_;
    st_->host_ended = true;
    note_growth(false);
    events_.clear();
    cursor_->finish(&events_);
    send_events();
    Message m;
    m.kind = Message::StepEnd;
    runner_->channel().push(std::move(m));
    st_->flush_host_drops();
  } else {
    finish_trace();
  }
  install(idle_.get());
  phase_ = Phase::Idle;
  cursor_.reset();
  double stall = t_stall - stall0_;
  stats_.host_stall_s += stall;
  stats_.host_busy_s += since(t0_) - stall;
  stats_.runner_busy_s = runner_->busy_s();
  stats_.runner_stall_s = runner_->stall_s();
  stats_.runner_cpu_s = runner_->cpu_s();
  stats_.fused_kernels = int64_t(runner_->fused_kernels());
  stats_.fused_ops = int64_t(runner_->fused_ops());
  stats_.side_heavy_ops = int64_t(runner_->side_heavy());
  stats_.side_ops = int64_t(runner_->side_ops());
  stats_.messages = int64_t(runner_->channel().sent());
  raise_pending(false);  // errors already known reach the program at the step's end
}

// A TraceGraph extended by most recent steps is not converging (e.g. a new shape every step): it
// would grow without bound, so co-execution stops for this engine and its memory is released.
void CoExecSession::note_growth(bool extended) {
  growth_bits_ = (growth_bits_ << 1) | (extended ? 1 : 0);
  // 56 of the last 64 steps, judged from step 128 on: programs that settle (a few new paths, even
  // tens of fallbacks early on) never trip it; one whose every step is new does by step 128.
  constexpr int kWindow = 64, kMaxExtending = 56, kMinSteps = 128;
  constexpr size_t kMaxNodes = 200000;
  bool never_converges = stats_.steps + 1 >= kMinSteps && __builtin_popcountll(growth_bits_) >= kMaxExtending;
  if (disabled_ || !(never_converges || tg_.num_nodes() > kMaxNodes)) return;
  sync_all();
  disabled_ = true;
  stats_.coexec_disabled = true;
  explain("co-execution stopped for this engine: the TraceGraph kept growing without converging (" +
          std::to_string(__builtin_popcountll(growth_bits_)) + " of the last " + std::to_string(kWindow) +
          " steps extended it; " + std::to_string(tg_.num_nodes()) + " nodes); later steps run eagerly");
  tg_ = trace::TraceGraph();
  known_metas_.clear();  // node ids start over
  sg_.reset();
  converged_ = false;
  cursor_.reset();
}

void CoExecSession::abort_step() {
  if (phase_ == Phase::CoExec) {
    st_->validated = seq_;
    st_->host_ended = true;
    st_->abort_at.store(seq_);
    Message m;
    m.kind = Message::Abort;
    runner_->channel().push(std::move(m));
    runner_->wait_steps_finished(steps_sent_);
    st_->host_reclaim();
  }
  install(idle_.get());
  phase_ = Phase::Idle;
  cursor_.reset();
  trace_.records.clear();
}

}  // namespace terra::runtime
