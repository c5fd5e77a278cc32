// The host's per-call path of a step (Terra §4.1): trace_call runs and records an op while
// tracing; skeleton_call matches it against the TraceGraph, tells the runner what it cannot
// predict (path choices, loop exits, feeds) and returns placeholders for the runner's values.
#include <string>

#include "terra/core/object_pool.h"
#include "terra/runtime/coexec.h"
#include "terra/runtime/placeholder.h"
#include "terra/runtime/skel_pending.h"

namespace terra::runtime {

void CoExecSession::push_choice(uint32_t sw, uint32_t value) {
  Message m;
  m.kind = Message::Choice;
  m.id = sw;
  m.seq = seq_;
  m.value = value;
  runner_->channel().push(std::move(m));
}

// A loop's exit is its only message: the runner runs a body once it reaches the loop, and takes
// another iteration once the host validated the position after the body without sending the exit
// (GraphRunner::loop_continues).
void CoExecSession::push_loop_exit(const trace::Node* loop) {
  if (loop->trip_counts.size() == 1) return;  // unrolled: the runner needs no Loop Cond
  Message m;
  m.kind = Message::LoopCond;
  m.id = loop->id;
  m.seq = seq_;
  m.value = 0;
  runner_->channel().push(std::move(m));
}

CoExecSession::RegionState CoExecSession::region_state(uint32_t key) const {
  const std::vector<uint32_t>& list = sg_->region_switches.at(key);
  bool quiet = true;
  for (uint32_t sw : list) quiet &= !sg_->switch_needs_select[sw];
  return {key, 0, &list, quiet};
}

// Decides, as "skipped", the region's case-select switches before position `upto`.
void CoExecSession::skip_until(RegionState& r, uint32_t upto) {
  const std::vector<uint32_t>& list = *r.switches;
  for (; r.next < upto && r.next < list.size(); ++r.next)
    if (sg_->switch_needs_select[list[r.next]]) push_choice(list[r.next], Message::kSkipped);
}

// Turns the walk's edges and loop decisions into Case Selects and Loop Conds, in the order the
// runner consumes them: every case-select switch of a region gets exactly one decision.
void CoExecSession::send_events() {
  // The usual call sends nothing: its events are edges between two ops that decide no switch, or,
  // in a region whose switches need no Case Select (a loop's body, usually), any edges between ops
  // and the next iteration (they only move the region's next switch, which then decides nothing).
  const bool quiet = regions_.back().quiet;
  bool silent = true;
  for (const auto& e : events_)
    silent &= e.kind == trace::Cursor::Event::LoopIterate
                  ? quiet
                  : e.kind == trace::Cursor::Event::Edge && e.to->kind == trace::Node::OpCall && edge_is_silent(e.from);
  if (silent) {
    events_.clear();
    return;
  }
  for (auto& e : events_) {
    RegionState& r = regions_.back();
    if (e.kind == trace::Cursor::Event::Edge) {
      auto it = sg_->choices.end();
      if (edge_may_decide(e.from))  // most edges decide nothing: no hash lookup
        it = sg_->choices.find(graph::SymbolicGraph::edge_key(e.from->id, e.to->id));
      if (it != sg_->choices.end())
        for (auto [sw, c] : it->second) {
          uint32_t pos = sg_->switch_pos[sw];
          skip_until(r, pos);
          if (r.next == pos) {
            if (sg_->switch_needs_select[sw]) push_choice(sw, c);
            r.next = pos + 1;
          }
        }
      if (e.to->kind == trace::Node::End) skip_until(r, ~0u);
      if (e.to->kind == trace::Node::Loop) regions_.push_back(region_state(e.to->id));
    } else if (e.kind == trace::Cursor::Event::LoopIterate) {
      skip_until(r, ~0u);
      r.next = 0;
    } else {  // LoopExit
      skip_until(r, ~0u);
      regions_.pop_back();
      push_loop_exit(e.to);
    }
  }
  events_.clear();
}

static std::string describe(const trace::Source& s) { return s.str(); }

// Whether a fed input of run `run` is the tensor the graph predicts there (graph::Input::by_run):
// the same tensor from before the step (its key is its id; a snapshot's is fresh).
static bool predicted_feed(const graph::Input& x, uint32_t run, const trace::Source& got) {
  return got.kind == trace::Source::Variable && run < x.by_run.size() && x.by_run[run] && x.by_run[run]->id == got.var_id;
}

// An in-place write into NumPy's memory or a view of it (runs_on_host): run now, kept out of the
// trace and the graph like a stateful op. The target is a host tensor again from here on, so
// later reads of it are feeds of its value at their call.
static TensorList host_call(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs, const TensorMetas& meta,
                            PhiloxKey rng) {
  TensorList out = execute_eager(op, in, attrs, meta, rng);
  for (uint32_t k = 0, n = inplace_targets(op, attrs); k < n; ++k) in[k].impl()->trace_step = 0;
  return out;
}

TensorList CoExecSession::skeleton_call(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                                        const TensorMetas& meta, PhiloxKey rng, const trace::Location& loc,
                                        Known known) {
  if (op.has(kStateful)) {  // effects outside tensors never enter the graph
    sync_validated();
    return execute_eager(op, in, attrs, meta, rng);
  }
  if (runs_on_host(op, in, attrs)) {
    if (op.has(kInplace)) sync_validated();  // an earlier op's error is raised before NumPy's memory changes
    return host_call(op, in, attrs, meta, rng);
  }
  events_.clear();
  int64_t varied = 0;
  // The usual call: the predicted op right after the previous one on an edge that decides no
  // switch, or the first op of a loop body's next iteration in a region whose switches need no
  // Case Select. Its events would tell the runner nothing (send_events): none is recorded.
  const bool quiet_edge =
      known.node && (known.iterate ? regions_.back().quiet : edge_is_silent(cursor_->position()));
  trace::Node* n = known.node ? cursor_->take(known.node, known.iterate, quiet_edge ? nullptr : &events_)
                               : cursor_->match(&op, attrs, loc, in.size(), &events_, &varied);
  stats_.predicted_calls += known.node != nullptr;
  if (!n) {
    std::string guard = explain_dir_.empty() ? "" : cursor_->near_miss(&op, attrs, loc, in.size());
    fall_back(std::string("new path: ") + op.name + "(" + attrs.str() + ") at " + loc.str() +
              " is not among the graph's next calls" + (guard.empty() ? "" : " (" + guard + ")"));
    return trace_call(op, in, attrs, meta, rng, loc);
  }
  if (varied & ~n->symbolic_attrs) {  // the graph baked these values in: trace, and take them per call from now on
    fall_back(std::string("attributes of ") + op.name + " (node " + std::to_string(n->id) + ") took new values: " +
              n->attrs.str() + " before, " + attrs.str() + " now");
    events_.clear();
    return trace_call(op, in, attrs, meta, rng, loc);
  }
  const std::vector<uint32_t>& exec = cursor_->exec_count();
  if (debug_protocol()) std::fprintf(stderr, "host: seq %llu node %u %s\n", (unsigned long long)seq_, n->id, op.name);
  bool msg = sg_->needs_message[n->id];
  bool fed = false;  // a chosen input comes as a feed (the message cannot be left out)
  // Phis and feeds the graph predicts for this run of the node (OpNode::run_predicted).
  const uint32_t run = exec[n->id] - 1;
  const graph::OpNode* by_run = msg && sg_->run_predicted[n->id] ? sg_->op_of[n->id] : nullptr;
  if (by_run && run >= by_run->predicted_runs) by_run = nullptr;
  // A phi takes another producer than predicted, or a symbolic attribute another value.
  bool differs = by_run && n->symbolic_attrs && !(attrs == by_run->attrs_by_run[run]);
  if (msg) {  // filled here, swapped into a channel slot below: both keep their capacity
    // Only default values are left in feeds_ when no message took it (a feed forces the message).
    feeds_.resize(in.size());
    phi_.assign(in.size(), 0);
  }
  if (op.has(kRandom)) st_->random_keys.emplace_back(seq_, rng);
  Hist h{n->id, exec[n->id] - 1, uint32_t(hist_inputs_.size()), uint32_t(in.size())};
  // Appended input by input below (a call that falls back midway leaves a few unread entries).
#ifndef NDEBUG
  got_.assign(in.size(), trace::Source{});
#endif
  for (size_t i = 0; i < in.size(); ++i) {
    TensorImpl* t = in[i].impl();
    const auto& set = n->sources[i];
    int idx = -1;
    trace::Source got;
    // A value of this step NumPy may have written since (a writable Tensor.numpy() view) is read
    // at the call, as any NumPy memory: a feed of its bytes now, not the runner's value.
    if (t->trace_step == step_uid_ && !needs_snapshot(*t)) {
      const Hist& p = hist_[t->trace_rec];
      got = {trace::Source::Op, p.node, t->trace_out, exec[p.node] - 1 - p.exec};
      hist_inputs_.push_back({false, t->trace_rec, t->trace_out, nullptr});
      for (size_t k = 0; k < set.size(); ++k)
        if (set[k] == got) idx = int(k);
    } else {
      // NumPy may overwrite a shared array before the runner reads it: feed a copy taken now.
      const bool snap = needs_snapshot(*t);
      const uint64_t key = snap ? trace::kFreshKey : trace::external_key(in[i].impl_ptr(), step_first_id_);
      const bool fresh = key == trace::kFreshKey;  // host data made in this step: only a feed takes it
      got.kind = fresh ? trace::Source::External : trace::Source::Variable;
      got.var_id = fresh ? 0 : key;
      if (snap && msg) {
        feeds_[i] = FeedValue{Tensor(host_snapshot(*t)), nullptr, 0};
        fed = true;
      }
      // The key alone: a matched source is already in its node's set, so a fallback's merge never
      // reads the tensor (add_source takes it only for a source new to the node).
      hist_inputs_.push_back({true, 0, 0, nullptr, key});
      for (size_t k = 0; k < set.size() && idx < 0; ++k)
        if (!fresh && set[k].kind == trace::Source::Variable && set[k].var_id == got.var_id) idx = int(k);
      for (size_t k = 0; k < set.size() && idx < 0; ++k)
        if (set[k].kind == trace::Source::External) idx = int(k);
    }
    if (idx < 0) {
      std::string have;
      for (auto& s : set) have += (have.empty() ? "" : ", ") + describe(s);
      fall_back(std::string("new input producer: input ") + std::to_string(i) + " of " + op.name + " comes from " +
                describe(got) + ", the graph has {" + have + "}");
      events_.clear();
      return trace_call(op, in, attrs, meta, rng, loc);
    }
#ifndef NDEBUG
    got_[i] = got;
#endif
    if (msg) {
      if (set.size() > 1) {
        phi_[i] = uint32_t(idx);
        if (by_run && by_run->picks_by_run[run][i] != uint32_t(idx)) differs = true;
      }
      // The runner reads a feed for External inputs and for phis that take a host value; a lone
      // Variable source is the graph's own tensor (Input::Variable).
      if (set[size_t(idx)].kind != trace::Source::Op && (set.size() > 1 || set[0].kind == trace::Source::External) &&
          !(by_run && predicted_feed(by_run->inputs[i], run, got))) {
        fed = true;
        std::shared_ptr<PendingValue> pv;  // kept: another thread's first read may drop t's meanwhile
        if (auto g = lock_if_awaiting(*t); g.owns_lock()) pv = t->pending;
        auto* sp = dynamic_cast<SkelPending*>(pv.get());
        // Another engine's placeholder: its runner is not ordered with this one, which could read
        // the cell before it is filled. Its value is taken here, as eager would read it.
        if (sp && !t->has_data() && sp->step && sp->step->runner != &runner_->channel()) {
          t->data();  // waits for that runner and installs its value here
          sp = nullptr;
        }
        if (sp && !t->has_data())  // settled: its value; else shares its ownership (the slot keeps the values)
          feeds_[i] = sp->settled.defined()
                          ? FeedValue{sp->settled, nullptr, 0}
                          : FeedValue{Tensor(), std::shared_ptr<ValueCell>(pv, &sp->slot->vals->cell), sp->out,
                                      sp->step.get(), sp->seq};
        else if (!feeds_[i].tensor.defined())  // (a snapshot was put there above)
          feeds_[i] = FeedValue{in[i], nullptr, 0};
      }
    }
  }
#ifndef NDEBUG
  ring_model_.validate(n->id, seq_, got_, phi_);
#endif
  if (!events_.empty()) send_events();
  if (by_run) {  // the prediction holds: no message (feeds_ keeps defaults only)
    if (!fed && !differs) msg = false;
    if (msg && sg_->phi_predicted[n->id]) phi_last_[n->id].record(step_uid_, phi_);  // as the runner records it
  } else if (msg && sg_->phi_predicted[n->id]) {  // the runner repeats the node's last choices unless told
    PhiChoices& last = phi_last_[n->id];
    if (!fed && last.repeats(step_uid_, phi_)) msg = false;
    else last.record(step_uid_, phi_);  // the runner records every message it takes for the node
  }
  if (msg) {
    Message& v = runner_->channel().back();
    v.kind = Message::Validate;
    v.id = n->id;
    v.seq = seq_;
    v.rng = rng;
    v.feeds.swap(feeds_);
    v.phi.swap(phi_);
    if (n->symbolic_attrs) v.attrs = attrs;
    runner_->channel().commit();
  }

  if (op.has(kInplace))
    for (uint32_t k = 0, n = inplace_targets(op, attrs); k < n; ++k)
      if (in[k].impl()->awaiting.load(std::memory_order_acquire)) note_value_write();  // this step (see thread_value_writes_pending)
  // Placeholders: shapes and strides exactly as eager would give them, values from the runner.
  bool ready = false;
  CellSlot* slot = st_->host_cell(seq_, &ready);
  SlotRef slot_ref(*st_, slot);
  const ValueCell* cell = &slot->vals->cell;
  const bool take_values = ready && !op.has(kView) && !op.has(kInplace);
  if (!take_values) slot->tracked = !op.has(kInplace);
  // Made in place (no move-assignment into a list made before): a pooled list freed per call.
  TensorList out = take_values ? TensorList()
                               : placeholder_outputs(op, in, attrs, meta, [&](TensorImpl& t, uint32_t k, bool storage_too) {
                                   set_pending<SkelPending>(t, storage_too, st_, slot, k, seq_);
                                 });
  if (take_values) {
    // The runner got here first: the outputs are its values, no placeholder to fill later.
    out.reserve(meta.size());
    for (uint32_t k = 0; k < meta.size(); ++k) {
      const TensorImpl& v = *cell->values.at(k).impl();
      auto t = make_pooled<TensorImpl>();
      t->numel = v.numel;
      t->shape = meta[k].shape;
      t->strides = v.strides;
      t->offset = v.offset;
      t->dtype = meta[k].dtype;
      t->storage = v.storage;
      out.emplace_back(std::move(t));
    }
  }
  for (uint32_t k = 0; k < out.size(); ++k) {
    TensorImpl* t = out[k].impl();
    t->trace_step = step_uid_;
    t->trace_rec = uint32_t(seq_);
    t->trace_out = k;
  }
  hist_.push_back(h);
  seq_++;
  st_->host_pos_mine = seq_;
  runner_->channel().publish(st_->host_pos, seq_);  // a runner waiting for this position may go on
  return out;
}

TensorList CoExecSession::trace_call(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                                     const TensorMetas& meta, PhiloxKey rng,
                                     const trace::Location& loc) {
  if (runs_on_host(op, in, attrs)) return host_call(op, in, attrs, meta, rng);
  TensorList out = execute_eager(op, in, attrs, meta, rng);
  if (op.has(kStateful)) return out;
  trace::Record r;
  r.op = &op;
  r.attrs = attrs;
  r.loc = loc;
  r.inputs.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    TensorImpl* t = in[i].impl();
    if (t->trace_step == step_uid_ && !needs_snapshot(*t))  // (skeleton_call: NumPy may have written it)
      r.inputs[i] = {false, t->trace_rec, t->trace_out, nullptr};
    else {
      trace::ExternalRef ext = trace::external_ref(in[i].impl_ptr(), step_first_id_);
      if (needs_snapshot(*t)) ext.key = trace::kFreshKey;  // a feed in the graph (ran eagerly here)
      r.inputs[i] = {true, 0, 0, std::move(ext.tensor), ext.key};
    }
  }
  r.fetched.assign(out.size(), false);
  r.out_meta.reserve(out.size());
  for (uint32_t k = 0; k < out.size(); ++k) {
    TensorImpl* t = out[k].impl();
    r.out_meta.push_back({t->shape, t->dtype});
    t->trace_step = step_uid_;
    t->trace_rec = uint32_t(trace_.records.size());
    t->trace_out = k;
  }
  trace_.records.push_back(std::move(r));
  return out;
}

}  // namespace terra::runtime
