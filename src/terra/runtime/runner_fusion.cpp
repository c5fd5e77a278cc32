// How the GraphRunner runs a block's fused segments (compile/fusion_plan.h): it gathers every
// op's host messages and outside inputs in position order, runs the segment as one tiled kernel,
// then publishes each op's outputs in position order as if they had run one by one. Whatever
// stops the gathering midway (an abort, a failed feed) first runs the ops before it one by one,
// as eager would have, so no prefix the host validated is ever lost.
#include <algorithm>
#include <cstdio>

#include "terra/compile/fused_elementwise.h"
#include "terra/core/dispatch.h"
#include "terra/core/execute.h"
#include "terra/runtime/graph_runner.h"

namespace terra::runtime {

using graph::Input;

BlockPlan& GraphRunner::plan_of(const std::vector<graph::Item>& block) {
  auto it = plans_.find(&block);
  if (it != plans_.end()) return it->second;
  if (readers_.of.empty()) readers_.build(*g_);
  return plans_.emplace(&block, compile::plan_block(block)).first->second;
}

void GraphRunner::run_span(const std::vector<graph::Item>& block, BlockPlan& plan, size_t span) {
  const FusionSpan& tmpl = plan.spans[span];
  std::vector<FusionSpan>& variants = plan.variants[span];
  // The first op's inputs pick the plan: every plan starts a segment there, so reading them now
  // is what any of them would do first.
  const graph::OpNode& op0 = block[tmpl.begin].op;
  std::vector<Tensor>& in0 = node_in_[op0.node];
  Message* v = begin_op(op0, pos_);
  read_inputs(op0, v, in0, nullptr);
  if (v) ch_.pop();
  FusionSpan* sp = nullptr;
  for (FusionSpan& c : variants) {
    bool same = c.key.size() == in0.size();
    for (size_t i = 0; same && i < in0.size(); ++i)
      same = c.key[i].shape == in0[i].impl()->shape && c.key[i].dtype == in0[i].impl()->dtype;
    if (same) sp = &c;
  }
  // Another shape (a new batch, a symbolic dimension): a plan whose fused segments all adapt to any
  // shape of their structure runs as is; each segment rebinds itself or, failing, runs unfused.
  for (size_t c = variants.size(); !sp && c-- > 0;)
    if (std::all_of(variants[c].segs.begin(), variants[c].segs.end(), [](auto& s) { return !s.fused || s.rebindable; }))
      sp = &variants[c];
  if (!sp) {  // op by op, recording the shapes the segments are cut by
    if (variants.size() >= BlockPlan::kMaxVariants) {
      run_read_op(op0, PhiloxKey{});
      for (uint32_t k = tmpl.begin + 1; k < tmpl.end; ++k) run_op(block[k].op);
      return;
    }
    FusionSpan rec = tmpl;
    for (const Tensor& t : in0) rec.key.push_back({t.impl()->shape, t.impl()->dtype});
    rec.rec.resize(rec.end - rec.begin);
    run_read_op(op0, PhiloxKey{}, &rec.rec[0]);
    for (uint32_t k = rec.begin + 1; k < rec.end; ++k) run_op(block[k].op, &rec.rec[k - rec.begin]);
    compile::plan_segments(block, rec, readers_);
    explain_span(block, rec);
    variants.push_back(std::move(rec));
    return;
  }
  for (FusedSegment& seg : sp->segs) {
    const bool first = seg.begin == tmpl.begin;
    if (seg.fused) {
      if (!run_segment(block, seg, first)) {
        const uint32_t rest = seg.end, end = tmpl.end;
        variants.erase(variants.begin() + (sp - variants.data()));  // recorded again next time
        for (uint32_t k = rest; k < end; ++k) run_op(block[k].op);
        return;
      }
      continue;
    }
    if (first) run_read_op(op0, PhiloxKey{});
    else run_op(block[seg.begin].op);
  }
}

bool GraphRunner::may_begin(const graph::OpNode& op, uint64_t p) const {
  if (st_->abort_at.load(std::memory_order_seq_cst) <= p) return true;  // begin_op raises the abort
  if (op.wait_validated && st_->host_pos.load(std::memory_order_seq_cst) <= p) return false;
  if ((op.phi_predicted || op.run_predicted) && st_->host_pos.load(std::memory_order_seq_cst) > p) return true;
  return !op.needs_message || !ch_.empty();
}

void GraphRunner::explain_span(const std::vector<graph::Item>& block, const FusionSpan& sp) {
  std::string dir;
  {
    std::lock_guard<std::mutex> g(mu_);
    dir = explain_dir_;
  }
  if (dir.empty()) return;
  size_t kernels = 0;
  std::string text = "fusion plan (graph " + std::to_string(g_->uid) + ", block ops " + std::to_string(sp.begin) + ".." +
                     std::to_string(sp.end - 1) + "):";
  for (const FusedSegment& seg : sp.segs) {
    kernels++;
    if (!seg.fused) {
      text += "\n  unfused " + std::string(block[seg.begin].op.op->name) + " (node " +
              std::to_string(block[seg.begin].op.node) + ")";
      continue;
    }
    size_t scratch = 0, written = 0, scratch_bytes = 0;
    for (size_t j = 0; j < seg.out_slot.size(); ++j) {
      const bool own = !(block[seg.begin + j].op.op->has(kInplace));
      if (own && seg.read_outside[j]) written++;
      else if (own) {
        scratch++;
        scratch_bytes += size_t(seg.kernel.numel) * itemsize(seg.out_meta[j].dtype);
      }
    }
    text += "\n  " + seg.kernel.describe() + "  [" + std::to_string(seg.end - seg.begin) + " ops -> 1 kernel; " +
            std::to_string(written) + " outputs written out, " + std::to_string(scratch) +
            " kept in tiles unless the host holds them (" +
            std::to_string(scratch_bytes) +
            " bytes not allocated per run)]";
  }
  text += "\n  kernels: " + std::to_string(sp.end - sp.begin) + " before, " + std::to_string(kernels) + " after";
  std::fprintf(stderr, "[terra explain] %s\n", text.c_str());
  if (FILE* f = std::fopen((dir + "/fusion.txt").c_str(), "a")) {
    std::fprintf(f, "%s\n", text.c_str());
    std::fclose(f);
  }
}

bool GraphRunner::inputs_present(const graph::OpNode& op, const Message* v, const uint8_t* skip) {
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (skip && skip[i]) continue;
    const Input& x = op.inputs[i];
    const trace::Source* s = nullptr;
    if (x.kind == Input::Value) s = &x.src;
    else if (const std::vector<uint32_t>* phi = x.kind == Input::Phi ? phi_of(op, v) : nullptr;
             phi && i < phi->size() && (*phi)[i] < x.candidates.size())
      s = &x.candidates[(*phi)[i]];
    if (!s || s->kind != trace::Source::Op) continue;
    std::vector<Tensor>* r = env_[s->node].at(ring_index(*s, op.node));
    if (!r || s->out >= r->size() || !(*r)[s->out].defined()) return false;
  }
  return true;
}

void GraphRunner::run_gathered(const std::vector<graph::Item>& block, const FusedSegment& seg, uint32_t count) {
  for (uint32_t j = 0; j < count; ++j) {
    const graph::OpNode& op = block[seg.begin + j].op;
    std::vector<Tensor>& in = node_in_[op.node];
    for (size_t i = 0; i < op.inputs.size(); ++i)
      if (seg.internal[j][i]) in[i] = (*env_[op.inputs[i].src.node].at(0)).at(op.inputs[i].src.out);
    cur_node_ = op.node;
    const TensorMetas& meta = op.op->has(kInplace) ? no_meta_ : meta_[op.node].get(op, in);
    exec_.run_op(op, in, op.attrs, meta, PhiloxKey{}, outs_);
    cur_node_ = kNoNode;
    finish_op(op, in, outs_);
  }
}

bool GraphRunner::run_segment(const std::vector<graph::Item>& block, FusedSegment& seg, bool first_read) {
  const uint32_t n = seg.end - seg.begin;
  for (uint32_t j = first_read ? 1 : 0; j < n; ++j) {
    const graph::OpNode& op = block[seg.begin + j].op;
    // The host may be waiting for an op gathered here (a fetch waits for every op it validated):
    // rather than wait for the host while holding those, run them now and the rest one by one.
    if (j > 0 && !may_begin(op, pos_ + j)) {
      ch_.wait_until([&] { return may_begin(op, pos_ + j) || st_->host_waits_for.load() != ~0ull; });
      if (!may_begin(op, pos_ + j)) {
        if (debug_protocol()) std::fprintf(stderr, "runner: pos %llu the host waits: segment cut\n", (unsigned long long)(pos_ + j));
        run_gathered(block, seg, j);
        for (uint32_t k = j; k < n; ++k) run_op(block[seg.begin + k].op);
        return true;
      }
    }
    Message* v = nullptr;
    bool missing = false;
    try {
      cur_node_ = op.node;
      v = begin_op(op, pos_ + j);
      // An input whose producer did not run means the runner is past the host's path; waiting for
      // the host's abort while holding validated ops could deadlock a host that fetches one of
      // them. Run those first (below); this op and the rest then go op by op.
      missing = j > 0 && !inputs_present(op, v, seg.internal[j].data());
      if (!missing) {
        read_inputs(op, v, node_in_[op.node], seg.internal[j].data());
        if (v) ch_.pop();
      }
    } catch (...) {
      run_gathered(block, seg, j);  // an error there is the earlier one: it replaces this
      throw;
    }
    if (missing) {
      run_gathered(block, seg, j);
      read_inputs(op, v, node_in_[op.node], nullptr);  // raises the abort (or the mismatch) with nothing held
      const PhiloxKey rng = v ? v->rng : PhiloxKey{};
      if (v) ch_.pop();
      run_read_op(op, rng);
      for (uint32_t k = j + 1; k < n; ++k) run_op(block[seg.begin + k].op);
      return true;
    }
  }
  cur_node_ = kNoNode;
  if (debug_protocol())
    std::fprintf(stderr, "runner: pos %llu %s\n", (unsigned long long)pos_, seg.kernel.describe().c_str());

  // The recorded shapes must still hold, and no in-place write may overlap another operand at a
  // different offset (a tile would read elements the unfused op had already overwritten).
  const size_t n_slots = seg.kernel.slot_dtype.size();
  slots_.assign(n_slots, Tensor());
  bool ok = true;
  for (const FusedSegment::Ext& e : seg.ext) {
    const Tensor& t = node_in_[block[seg.begin + e.op].op.node][e.input];
    const TensorImpl& ti = *t.impl();
    ok = ok && ti.dtype == e.dtype && ti.shape == e.shape && (e.scalar || ti.is_contiguous());
    slots_[e.slot] = t;
  }
  if (!ok) {  // another shape: the same segment over it, if its structure holds
    ext_impls_.clear();
    for (const FusedSegment::Ext& e : seg.ext) ext_impls_.push_back(slots_[e.slot].impl());
    ok = seg.rebind(ext_impls_);
  }
  for (uint32_t j = 0; ok && j < n; ++j) {
    if (!seg.writes_ext[j]) continue;
    const TensorImpl& target = *slots_[seg.out_slot[j]].impl();
    for (const FusedSegment::Ext& e : seg.ext) {
      const TensorImpl& o = *slots_[e.slot].impl();
      if (e.slot != seg.out_slot[j] && o.storage == target.storage && (e.scalar || o.offset != target.offset)) ok = false;
    }
  }
  // Outputs someone may read after the segment are written out; the rest live only in tiles.
  keep_.assign(n_slots, 0);
  for (uint32_t j = 0; j < n; ++j)
    if (seg.read_outside[j] || st_->host_may_read(pos_ + j)) keep_[seg.out_slot[j]] = 1;
  try {
    for (uint32_t j = 0; ok && j < n; ++j) {
      const uint32_t s = seg.out_slot[j];
      if (keep_[s] && !slots_[s].defined())
        slots_[s] = empty(seg.out_meta[j].shape, seg.out_meta[j].dtype, block[seg.begin + j].op.op->name);
    }
  } catch (...) {
    ok = false;  // unfused, the op that cannot allocate raises it at its own position
  }
  if (!ok) {
    if (debug_protocol()) std::fprintf(stderr, "runner: pos %llu segment no longer fits its plan: unfused\n", (unsigned long long)pos_);
    slots_.clear();
    run_gathered(block, seg, n);
    return false;
  }
  cur_node_ = block[seg.begin].op.node;
  compile::run_fused(seg.kernel, slots_);
  cur_node_ = kNoNode;
  fused_kernels_.fetch_add(1, std::memory_order_relaxed);
  fused_ops_.fetch_add(n, std::memory_order_relaxed);
  for (uint32_t j = 0; j < n; ++j) {
    const graph::OpNode& op = block[seg.begin + j].op;
    outs_.clear();
    if (slots_[seg.out_slot[j]].defined()) outs_.push_back(slots_[seg.out_slot[j]]);
    finish_op(op, node_in_[op.node], outs_);
  }
  slots_.clear();
  return true;
}

}  // namespace terra::runtime
