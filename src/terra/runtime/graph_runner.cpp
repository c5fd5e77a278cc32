#include "terra/runtime/graph_runner.h"

#include <pthread.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "terra/compile/passes.h"
#include "terra/core/dispatch.h"
#include "terra/core/execute.h"
#include "terra/core/float_env.h"
#include "terra/core/threads.h"
#include "terra/runtime/lend_core.h"
#include "terra/trace/trace_graph.h"

namespace terra::runtime {

using graph::Input;

void BlockExecutor::run_op(const graph::OpNode& op, std::vector<Tensor>& in, const Attrs& attrs,
                           const TensorMetas& meta, PhiloxKey rng, std::vector<Tensor>& outs) {
  execute_eager_into(*op.op, in, attrs, meta, rng, /*bump_version=*/false, outs);
}

const TensorMetas& GraphRunner::MetaCache::get(const graph::OpNode& op, const std::vector<Tensor>& inputs) {
  if (valid && metas_match(in, inputs)) return out;
  out = op.op->infer(inputs, op.attrs);
  record_metas(in, inputs);
  valid = true;
  return out;
}

void GraphRunner::Ring::push_front(std::vector<Tensor>& outs) {
  head = head == 0 ? uint32_t(slots.size() - 1) : head - 1;
  slots[head].swap(outs);
  outs.clear();
  if (count < slots.size()) count++;
  runs++;
}

void GraphRunner::Ring::clear() {
  for (auto& s : slots) s.clear();
  head = count = runs = 0;
}

GraphRunner::GraphRunner() : thread_([this] { loop(); }) {}

GraphRunner::~GraphRunner() {
  Message m;
  m.kind = Message::Shutdown;
  ch_.push(std::move(m));
  thread_.join();
}

void GraphRunner::wait_steps_finished(uint64_t n) {
  if (steps_finished_.load() >= n) return;
  HostWaiting blocked(host_waiting_.get());  // only host threads wait here: the runner may use every core
  // The run-ahead bound and synchronize() lend the host's core too (lend_core.h).
  if (num_threads() > 1 && lend_core_while([&] { return steps_finished_.load(std::memory_order_acquire) >= n; }))
    return;
  std::unique_lock<std::mutex> g(mu_);
  cv_.wait(g, [&] { return steps_finished_.load() >= n; });
}

void GraphRunner::loop() {
  pthread_setname_np(pthread_self(), "terra-runner");  // names it in top, perf and gdb
  place_runner_thread();  // never on a pool worker's CPU (core/threads.h)
  take_tensor_ids_in_blocks();  // its tensors never reach the host as objects
  leave_core_to_host(host_waiting_.get());
  for (;;) {
    Message& m = ch_.front();
    if (m.kind == Message::Shutdown) return;
    if (m.kind != Message::StepBegin) {  // leftovers of an aborted step
      ch_.pop();
      continue;
    }
    std::shared_ptr<StepState> keep = std::move(m.step);
    ch_.pop();
    StepState& st = *keep;
    auto t0 = std::chrono::steady_clock::now();
    double stall0 = ch_.waited_s();
    std::exception_ptr err;
    cur_node_ = kNoNode;
    bool cut = true;  // the step stopped inside an op (abort or error)
    try {
      run_step(st);
      cut = false;
    } catch (Abort&) {
    } catch (PropagatedError& p) {
      err = p.error;  // an input's producer failed: the same error, not a new one
    } catch (...) {
      err = with_call_site(std::current_exception(), st);
    }
    for (uint32_t n : touched_) env_[n].clear();  // no value outlives its step on the runner
    std::fill(pos_run_.begin(), pos_run_.end(), PosRun{});
    ring_drops_.clear();
    ring_drops_head_ = 0;
    outs_.clear();                                 // (an op that failed may have left outputs here)
    if (cut) node_in_.clear();  // an op stopped midway may have left its inputs behind
    touched_.clear();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    busy_s_.store(busy_s_.load() + dt - (ch_.waited_s() - stall0));
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    cpu_s_.store(double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec));
    if (err) st.runner_fail(pos_, err);  // no op of the step past this one runs: it ends as eager would
    {
      std::lock_guard<std::mutex> g(st.mu);
      st.finished = true;
      st.graph.reset();  // placeholders keep the step state; they must not keep the graph's variables
    }
    st.cv.notify_all();
    {
      std::lock_guard<std::mutex> g(mu_);
      steps_finished_++;
    }
    cv_.notify_all();
  }
}

// The error as the op raised it, with the user's call site of that op appended once.
std::exception_ptr GraphRunner::with_call_site(std::exception_ptr err, const StepState& st) const {
  std::string where = " (computed by the GraphRunner";
  if (cur_node_ != kNoNode && st.tg && cur_node_ < st.tg->num_nodes()) {
    std::string frames = st.tg->node(cur_node_)->loc.user_str();
    if (!frames.empty()) where += "; op called from " + frames;
  }
  where += ")";
  try {
    rethrow_with_context(err, where);
  } catch (...) {
    return std::current_exception();
  }
}

void GraphRunner::run_step(StepState& st) {
  set_thread_float_env();  // its kernels' scopes then change nothing; per step, as a user may switch
  st_ = &st;
  g_ = st.graph.get();
  pos_ = 0;
  if (g_ != inputs_graph_) {  // variables kept for the old graph's nodes are let go
    node_in_.clear();
    inputs_graph_ = g_;
  }
  if (g_->uid != plans_graph_) {  // plans and readers belong to one graph
    plans_.clear();
    readers_.of.clear();
    plans_graph_ = g_->uid;
  }
  if (node_in_.size() < g_->max_age.size()) node_in_.resize(g_->max_age.size());
  if (meta_.size() < g_->max_age.size()) meta_.resize(g_->max_age.size());
  if (env_.size() < g_->max_age.size()) env_.resize(g_->max_age.size());
  for (size_t n = 0; n < g_->max_age.size(); ++n)
    if (env_[n].slots.size() != size_t(g_->max_age[n]) + 1) env_[n].slots.resize(size_t(g_->max_age[n]) + 1);
  if (st.abort_at.load() == 0) throw Abort{};
  run_region(g_->root);
  // Whatever ends the step: its end marker, or an abort after all validated ops ran.
  for (;;) {
    Message::Kind k = ch_.front().kind;
    ch_.pop();
    if (k == Message::StepEnd || k == Message::Abort) return;
  }
}

int GraphRunner::take_choice(uint32_t sw) {
  Message& m = ch_.front();  // the host decides every case-select switch, skipped ones included
  if (m.kind == Message::Abort) {
    ch_.pop();
    throw Abort{};
  }
  if (m.kind != Message::Choice || m.id != sw)
    throw std::runtime_error("[GraphRunner] internal: expected the case select of switch " + std::to_string(sw) +
                             " at position " + std::to_string(pos_));
  int c = m.value == Message::kSkipped ? -1 : int(m.value);
  ch_.pop();
  return c;
}

Message* GraphRunner::word_at(uint64_t p) {
  ch_.wait_until([&] { return !ch_.empty() || st_->host_pos.load(std::memory_order_seq_cst) > p; });
  // Checked again after the validation was seen: a message sent before it is visible now. (An
  // abort always comes as a message, after abort_at.)
  return ch_.empty() ? nullptr : &ch_.front();
}

bool GraphRunner::loop_continues(uint32_t loop) {
  const uint64_t p = pos_;
  Message* m = word_at(p);
  if (!m) return true;  // validated in the body without an exit
  // The exit sent at this position. Iterations send nothing, so a runner behind the host may find
  // the exit of a later instance of this check first: its position is a later one.
  if (m->kind == Message::LoopCond && m->id == loop && m->seq == p) {
    const bool it = m->value != 0;
    ch_.pop();
    return it;
  }
  if (m->kind == Message::Abort) {
    // The host validated `p` before it fell back: in this body (an exit is sent before the
    // position after the loop is validated).
    if (p < st_->abort_at.load(std::memory_order_seq_cst)) return true;
    ch_.pop();
    throw Abort{};
  }
  if (m->kind != Message::Choice && m->kind != Message::Validate && m->kind != Message::LoopCond)
    throw std::runtime_error("[GraphRunner] internal: expected the loop condition of loop " + std::to_string(loop));
  return true;  // a message of a later position: the host went on in the body (an exit here comes first)
}

bool GraphRunner::has_validate(const graph::OpNode& op, uint64_t p) {
  const Message* m = word_at(p);
  if (!m) return false;  // validated without a message
  if (m->kind == Message::Validate && m->id == op.node && m->seq == p) return true;
  // An abort after the host validated `p` leaves `p` to run; any other message is the host's
  // after it validated `p` (earlier ones were taken before this op).
  return m->kind == Message::Abort && p >= st_->abort_at.load(std::memory_order_seq_cst);
}

const std::vector<uint32_t>* GraphRunner::phi_of(const graph::OpNode& op, const Message* v) const {
  if (v) return &v->phi;
  if (op.run_predicted && cur_run_ < op.predicted_runs) return &op.picks_by_run[cur_run_];  // the prediction held
  if (op.phi_predicted && op.node < phi_last_.size() && phi_last_[op.node].step == st_->uid) return &phi_last_[op.node].phi;
  return nullptr;
}

// The runner ran ahead onto a path the host did not take (an input's producer did not run):
// the host is about to fall back. Wait for its abort; anything else is an internal error.
void GraphRunner::wait_for_abort(const std::string& why) {
  for (;;) {
    // The host validating this position means it took this path after all: it will not abort,
    // and the host may be waiting for this very op (an error, not a deadlock).
    ch_.wait_until([&] { return !ch_.empty() || st_->host_pos.load(std::memory_order_seq_cst) > pos_; });
    if (ch_.empty()) throw std::runtime_error("[GraphRunner] internal: the host validated an op whose input the runner lacks: " + why);
    Message::Kind k = ch_.front().kind;
    if (k == Message::StepBegin || k == Message::Shutdown)  // left for loop() to handle
      throw std::runtime_error("[GraphRunner] internal: " + why);
    ch_.pop();
    if (k == Message::Abort) throw Abort{};
    if (k == Message::StepEnd) throw std::runtime_error("[GraphRunner] internal: " + why);
  }
}

// An input's producer did not run (or its value was dropped). If the host validated this very op
// here, it matched that producer and will not fall back for it: a graph/host mismatch (waiting
// would deadlock). Otherwise the runner ran ahead onto a path the host may not take.
void GraphRunner::missing_value(const graph::OpNode& op, const trace::Source& s, bool validated) {
  std::string what = "value " + s.str() + " read by node " + std::to_string(op.node) + " (" + op.op->name +
                     ") at position " + std::to_string(pos_) + " is missing";
  if (debug_protocol()) std::fprintf(stderr, "runner: %s%s\n", what.c_str(), validated ? " (validated)" : "");
  if (validated) throw std::runtime_error("[GraphRunner] internal: the host validated an op whose input the runner lacks: " + what);
  wait_for_abort(what);
}

Message& GraphRunner::take_validate(uint32_t node, uint64_t p) {
  Message& m = ch_.front();
  if (m.kind == Message::Abort) {
    ch_.pop();
    throw Abort{};
  }
  if (m.kind != Message::Validate || m.id != node || m.seq != p)
    throw std::runtime_error("[GraphRunner] internal: expected validation of node " + std::to_string(node) +
                             " at position " + std::to_string(p));
  return m;
}

void GraphRunner::run_region(const graph::Region& r) {
  for (const graph::Switch& sw : r.switches) {
    int c = sw.needs_select ? take_choice(sw.id) : 0;
    if (debug_protocol()) std::fprintf(stderr, "runner: switch %u -> case %d\n", sw.id, c);
    if (c < 0) continue;
    run_block(sw.cases[size_t(c)].block);
  }
}

void GraphRunner::run_block(const std::vector<graph::Item>& block) {
  BlockPlan* plan = compile::pass_enabled(compile::Pass::FuseElementwise) ? &plan_of(block) : nullptr;
  const bool side = compile::pass_enabled(compile::Pass::SideBySide);
  size_t next_span = 0;
  for (size_t k = 0; k < block.size();) {
    const bool span_here = plan && next_span < plan->spans.size();
    if (span_here && plan->spans[next_span].begin == k) {
      const size_t s = next_span++;
      run_span(block, *plan, s);
      k = plan->spans[s].end;
      continue;
    }
    const graph::Item& it = block[k];
    if (!it.is_loop) {
      const size_t ran = side ? run_side_by_side(block, k, span_here ? plan->spans[next_span].begin : block.size()) : 0;
      if (ran == 0) run_op(it.op);
      k += ran ? ran : 1;
      continue;
    }
    k++;
    if (it.fixed_trips >= 0) {
      for (int64_t i = 0; i < it.fixed_trips; ++i) run_region(*it.body);
    } else {
      do run_region(*it.body);
      while (loop_continues(it.loop_node));
    }
    release(it.release_after_loop);
  }
}

Message* GraphRunner::begin_op(const graph::OpNode& op, uint64_t p) {
  if (p >= st_->abort_at.load(std::memory_order_acquire)) throw Abort{};
  if (op.run_predicted) {  // counted before any wait: every run the host validated is begun once
    if (runs_.size() <= op.node) runs_.resize(size_t(op.node) + 1);
    Runs& r = runs_[op.node];
    if (r.step != st_->uid) r = Runs{st_->uid};
    if (r.pos != p) {
      r.run = r.next++;
      r.pos = p;
    }
    cur_run_ = r.run;
  }
  if (op.wait_validated)
    ch_.wait_until([&] {
      return st_->host_pos.load(std::memory_order_seq_cst) > p || st_->abort_at.load(std::memory_order_seq_cst) <= p;
    });
  if (p >= st_->abort_at.load(std::memory_order_acquire)) throw Abort{};
  if ((op.run_predicted || op.phi_predicted) && !has_validate(op, p)) {
    if (!phi_of(op, nullptr))
      throw std::runtime_error("[GraphRunner] internal: node " + std::to_string(op.node) + " at position " +
                               std::to_string(p) + " came without its first message of the step");
    return nullptr;
  }
  if (!op.needs_message) return nullptr;
  Message& m = take_validate(op.node, p);
  if (op.phi_predicted) {  // the choices a later run without a message repeats (the host keeps the same)
    if (phi_last_.size() <= op.node) phi_last_.resize(size_t(op.node) + 1);
    phi_last_[op.node].record(st_->uid, m.phi);
  }
  return &m;
}

void GraphRunner::read_inputs(const graph::OpNode& op, const Message* v, std::vector<Tensor>& in, const uint8_t* skip,
                              bool borrow) {
  in.resize(op.inputs.size());
  auto value = [&](const trace::Source& s) -> Tensor {
    std::vector<Tensor>* r = env_[s.node].at(ring_index(s, op.node));
    if (!r || s.out >= r->size() || !(*r)[s.out].defined()) missing_value(op, s, op.needs_message || op.wait_validated);
    // (A borrowed handle: the aliasing constructor with an empty owner has no control block.)
    if (borrow) return Tensor(std::shared_ptr<TensorImpl>(std::shared_ptr<TensorImpl>(), (*r)[s.out].impl()));
    return (*r)[s.out];
  };
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (skip && skip[i]) continue;
    const Input& x = op.inputs[i];
    switch (x.kind) {
      case Input::Value: in[i] = value(x.src); break;
      case Input::Variable:
        if (in[i].impl() != x.var.get()) in[i] = Tensor(x.var);
        break;
      case Input::Feed: {
        // With run_predicted, the host fed only inputs that are not the predicted tensor.
        const FeedValue* f = v ? &v->feeds.at(i) : nullptr;
        if (f && (f->tensor.defined() || f->cell)) in[i] = f->resolve();
        else if (op.run_predicted && cur_run_ < x.by_run.size() && x.by_run[cur_run_]) in[i] = Tensor(x.by_run[cur_run_]);
        else throw std::runtime_error("[GraphRunner] internal: no feed for input " + std::to_string(i) + " of node " +
                                      std::to_string(op.node) + " at position " + std::to_string(pos_));
        break;
      }
      case Input::Phi: {
        const trace::Source& s = x.candidates.at(phi_of(op, v)->at(i));
        in[i] = s.kind == trace::Source::Op ? value(s) : v->feeds.at(i).resolve();  // (no message: an op's)
        break;
      }
    }
  }
}

void GraphRunner::run_op(const graph::OpNode& op, OpRecord* rec) {
  Message* v = begin_op(op, pos_);  // popped once the inputs are read
  const PhiloxKey rng = v ? v->rng : PhiloxKey{};
  // Per node and kept across steps: a variable input is set once, so the runner does not touch
  // the reference counts the host's skeleton keeps changing on the same tensors (a cache line
  // bouncing between the two cores on every op).
  std::vector<Tensor>& in = node_in_[op.node];
  // Borrowed: the ring keeps each value until this op published its outputs (keep_outputs drops
  // the handles first), and an op that keeps an input (a view's base, an in-place target as its
  // output) owns them.
  read_inputs(op, v, in, nullptr, !op.op->has(kView) && !op.op->has(kInplace));
  if (debug_protocol()) std::fprintf(stderr, "runner: pos %llu node %u %s\n", (unsigned long long)pos_, op.node, op.op->name);
  // The call's own values: its message's, or the run's predicted ones the host found equal.
  if (op.symbolic_attrs) {
    if (v) std::swap(call_attrs_, v->attrs);
    else if (op.run_predicted && cur_run_ < op.attrs_by_run.size()) call_attrs_ = op.attrs_by_run[cur_run_];
    else throw std::runtime_error("[GraphRunner] internal: node " + std::to_string(op.node) + " at position " +
                                  std::to_string(pos_) + " has symbolic attributes and no message");
  }
  if (v) ch_.pop();
  run_read_op(op, rng, rec);
}

void GraphRunner::run_read_op(const graph::OpNode& op, PhiloxKey rng, OpRecord* rec) {
  std::vector<Tensor>& in = node_in_[op.node];
  cur_node_ = op.node;
  // A regenerated graph keeps every node id's op and attributes (TraceGraph nodes never change),
  // so cached metas stay valid; new nodes get empty entries.
  // A node with symbolic attributes runs with the call's values (infers its shapes every time).
  const Attrs& attrs = op.symbolic_attrs ? call_attrs_ : op.attrs;
  // A view allocates nothing, but its shape inference still runs (cached per input shapes): ahead of
  // the host, the runner may meet an input of another shape than the baked attributes fit, and
  // must raise there (the host then falls back) rather than make a view past the storage.
  if (op.op->has(kView)) {
    if (op.symbolic_attrs) op.op->infer(in, attrs);
    else meta_[op.node].get(op, in);
  }
  const TensorMetas& meta = op.op->has(kView) || op.op->has(kInplace) ? no_meta_
                            : op.symbolic_attrs ? (call_meta_ = op.op->infer(in, attrs))
                                                : meta_[op.node].get(op, in);
  std::vector<Tensor>& outs = outs_;
  exec_.run_op(op, in, attrs, meta, rng, outs);
  cur_node_ = kNoNode;
  if (rec) {
    rec->in.resize(in.size());
    rec->in_contig.resize(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      rec->in[i] = {in[i].impl()->shape, in[i].impl()->dtype};
      rec->in_contig[i] = in[i].impl()->is_contiguous();
    }
    rec->out = {outs.at(0).impl()->shape, outs[0].impl()->dtype};
    rec->out_contig = outs[0].impl()->is_contiguous();
  }
  finish_op(op, in, outs);
}

void GraphRunner::finish_op(const graph::OpNode& op, std::vector<Tensor>& in, std::vector<Tensor>& outs) {
  st_->runner_store(pos_, outs);
  keep_outputs(op, pos_, in, outs);
  advance();
}

void GraphRunner::keep_outputs(const graph::OpNode& op, uint64_t p, std::vector<Tensor>& in, std::vector<Tensor>& outs) {
  for (size_t i = 0; i < in.size(); ++i)  // values die with their step; variables stay
    if (op.inputs[i].kind != Input::Variable) in[i] = Tensor();
  Ring& ring = env_[op.node];
  if (ring.count == 0) touched_.push_back(op.node);
  if (pos_run_.size() <= p) pos_run_.resize(std::max<size_t>(p + 1, 2 * pos_run_.size()));
  pos_run_[p] = {op.node, ring.runs};
  ring.push_front(outs);
  release(op.release_after);
}

namespace {
// Output `out` of one run's values, or all of them (graph::Release::kAllOutputs).
void drop_outputs(std::vector<Tensor>& v, uint32_t out) {
  if (out == graph::Release::kAllOutputs) v.clear();
  else if (out < v.size()) v[out] = Tensor();
}
}  // namespace

void GraphRunner::apply_ring_drops() {
  if (st_->has_ring_drops()) st_->runner_take_ring_drops(ring_drops_);
  // Queued in host order, so `after` never decreases: stop at the first one not yet due.
  for (; ring_drops_head_ < ring_drops_.size(); ++ring_drops_head_) {
    const RingDrop& d = ring_drops_[ring_drops_head_];
    if (d.after > pos_) return;  // an op validated before the handle died may still read it
    if (d.pos >= pos_run_.size() || pos_run_[d.pos].node == kNoNode) continue;  // ran in no ring (a tile)
    const PosRun& r = pos_run_[d.pos];
    Ring& ring = env_[r.node];
    if (std::vector<Tensor>* v = ring.at(ring.runs - 1 - r.run)) drop_outputs(*v, d.out);
  }
  ring_drops_.clear();
  ring_drops_head_ = 0;
}

void GraphRunner::release(const std::vector<graph::Release>& values) {
  for (const graph::Release& r : values)
    if (std::vector<Tensor>* v = env_[r.node].at(0)) drop_outputs(*v, r.out);
}

void GraphRunner::advance() {
  pos_++;
  // Against the host_waits_for load below: a full fence, or only a compiler one where the host
  // fences this thread before it sleeps (wait_step). A fence per op waited for every store the
  // op's kernel left in the store buffer.
  store_before_sleep_check(st_->done, pos_, light_done_);
  if (pos_ >= st_->host_waits_for.load()) {
    { std::lock_guard<std::mutex> g(st_->mu); }
    st_->cv.notify_all();
  }
  if (ring_drops_head_ < ring_drops_.size() || st_->has_ring_drops()) apply_ring_drops();
}

}  // namespace terra::runtime
