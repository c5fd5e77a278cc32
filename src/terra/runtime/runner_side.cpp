// Ops side by side: what a graph knows and eager cannot. While the host is blocked on the runner
// (a fetch, the run-ahead bound) a core is spare; eager would spend it only on loops big enough to
// split, but a training step's products are mostly too small for that. Backward, though, is full
// of products that do not read each other (a linear's input and weight gradients, q/k/v
// projections): the runner hands a heavy op to a pool worker and runs the next ops that do not
// read it itself. Every op still runs its own kernel with its own fixed partition, so the values
// are eager's; outputs are published to the host in position order, so what the host sees (done
// positions, errors, aborts) is what running the ops one by one would give.
#include <atomic>
#include <exception>

#include "terra/backend/cpu/thread_pool.h"
#include "terra/compile/passes.h"
#include "terra/core/threads.h"
#include "terra/runtime/graph_runner.h"

namespace terra::runtime {

using graph::Input;

namespace {

// Multiply-adds below which a heavy op is not worth handing off: ~2^18 is ~10 µs on one core,
// against a worker's wake-up and the hand-off of a few µs. Tests lower it to reach small ops.
std::atomic<int64_t> g_side_min_work{int64_t(1) << 18};
// Ops run beside one heavy op at most (views and small ops between two products).
constexpr size_t kSideMaxOps = 12;

// Whether `op` reads (or releases) node `n`'s values.
bool touches_node(const graph::OpNode& op, uint32_t n) {
  for (const Input& x : op.inputs) {
    if (x.kind == Input::Value && x.src.node == n) return true;
    if (x.kind == Input::Phi)
      for (const trace::Source& s : x.candidates)
        if (s.kind == trace::Source::Op && s.node == n) return true;
  }
  for (const graph::Release& r : op.release_after)
    if (r.node == n) return true;
  return false;
}

// Ops that may run while another op's kernel runs on a worker: nothing written but their own new
// outputs (no in-place writes, which could race with the heavy op's reads), attributes fixed.
bool may_run_beside(const graph::OpNode& op) {
  return !op.symbolic_attrs && !op.op->has(kInplace) && !op.op->has(kStateful);
}

struct HeavyTask {
  BlockExecutor* exec;
  const graph::OpNode* op;
  std::vector<Tensor>* in;
  const TensorMetas* meta;
  PhiloxKey rng;
  std::vector<Tensor>* outs;
  std::exception_ptr err;

  static void run(void* ctx, int64_t, int64_t) {
    auto& t = *static_cast<HeavyTask*>(ctx);
    try {
      t.exec->run_op(*t.op, *t.in, t.op->attrs, *t.meta, t.rng, *t.outs);
    } catch (...) {
      t.err = std::current_exception();
    }
  }
};

}  // namespace

void set_side_min_work(int64_t macs) { g_side_min_work.store(macs, std::memory_order_relaxed); }

size_t GraphRunner::run_side_by_side(const std::vector<graph::Item>& block, size_t k, size_t end) {
  const graph::OpNode& a = block[k].op;
  if (!a.op->work || a.op->has(kView) || !may_run_beside(a) || k + 1 >= end || loop_helpers() < 1) return 0;
  if (!may_begin(a, pos_)) return 0;
  // Worth it only when enough work could run beside it: another heavy op, or elementwise work
  // (by the sizes the ops had last time) of half the heavy op's. Else its own loops split it better.
  auto cached_work = [&](uint32_t node) -> int64_t {  // 0 for an op that has not run yet
    if (node >= meta_.size() || !meta_[node].valid) return 0;
    int64_t n = 0;
    for (const TensorMeta& m : meta_[node].out) n += numel_of(m.shape);
    return kElementWork * n;
  };
  bool heavy_beside = false;
  int64_t light_beside = 0;
  for (size_t j = k + 1; j < end && j <= k + kSideMaxOps && !heavy_beside; ++j) {
    const graph::Item& it = block[j];
    if (it.is_loop || !may_run_beside(it.op) || touches_node(it.op, a.node)) break;
    if (it.op.op->work) heavy_beside = true;
    else if (!it.op.op->has(kView)) light_beside += cached_work(it.op.node);
  }
  if (!heavy_beside && light_beside == 0) return 0;

  Message* v = begin_op(a, pos_);
  std::vector<Tensor>& ain = node_in_[a.node];
  read_inputs(a, v, ain, nullptr);
  const PhiloxKey arng = v ? v->rng : PhiloxKey{};
  if (v) ch_.pop();
  cur_node_ = a.node;  // names the call site of a shape error
  const TensorMetas& ameta = meta_[a.node].get(a, ain);
  const int64_t work = op_work(*a.op, ain, ameta, a.attrs);
  if (work < g_side_min_work.load(std::memory_order_relaxed) || (!heavy_beside && 2 * light_beside < work)) {
    run_read_op(a, arng);
    return 1;
  }
  cur_node_ = kNoNode;

  HeavyTask task{&exec_, &a, &ain, &ameta, arng, &side_outs_, nullptr};
  // side_ keeps its entries and their lists' capacity from call to call: only the first side_n
  // are this call's (a list per side op allocated and freed ~12 times a width-128 step).
  size_t side_n = 0;
  auto add_side = [&](const graph::OpNode* op) {
    if (side_n == side_.size()) side_.emplace_back();
    side_[side_n].op = op;
    side_[side_n].outs.clear();
    return &side_[side_n++];
  };
  std::exception_ptr err;  // of the first side op that failed (it is the last side entry)
  {
    cpu::ForkedTask forked = cpu::pool_fork(&HeavyTask::run, &task);
    int64_t beside = 0;  // work run here so far: stop once it matches the heavy op's
    for (size_t j = k + 1; j < end && side_n < kSideMaxOps && beside < work; ++j) {
      const graph::Item& it = block[j];
      if (it.is_loop || !may_run_beside(it.op) || touches_node(it.op, a.node)) break;
      const graph::OpNode& op = it.op;
      const uint64_t p = pos_ + 1 + side_n;
      // Never wait for the host while the heavy op's outputs are unpublished: it may be waiting for them.
      if (!may_begin(op, p)) break;
      try {
        Message* m = begin_op(op, p);
        if (!inputs_present(op, m, nullptr)) break;  // past the host's path: the usual route waits for its abort
        std::vector<Tensor>& in = node_in_[op.node];
        read_inputs(op, m, in, nullptr);
        const PhiloxKey rng = m ? m->rng : PhiloxKey{};
        if (m) ch_.pop();
        SideOp* side = add_side(&op);
        cur_node_ = op.node;
        if (op.op->has(kView)) meta_[op.node].get(op, in);  // as run_read_op: a bad view raises here
        const TensorMetas& meta = op.op->has(kView) ? no_meta_ : meta_[op.node].get(op, in);
        exec_.run_op(op, in, op.attrs, meta, rng, outs_);
        cur_node_ = kNoNode;
        beside += op_work(*op.op, in, meta, op.attrs);
        side->outs.assign(outs_.begin(), outs_.end());  // kept for the host; the ring takes outs_
        keep_outputs(op, p, in, outs_);
      } catch (...) {
        err = std::current_exception();
        if (side_n == 0 || side_[side_n - 1].op != &op) add_side(&op);
        break;
      }
    }
    forked.join();  // HeavyTask keeps its own error
  }
  side_heavy_.fetch_add(1, std::memory_order_relaxed);
  side_ops_.fetch_add(side_n, std::memory_order_relaxed);
  if (task.err) {  // the earliest position wins, as one by one
    for (size_t i = 0; i < side_n; ++i) side_[i].outs.clear();  // a later call may reuse fewer entries
    cur_node_ = a.node;
    std::rethrow_exception(task.err);
  }
  finish_op(a, ain, side_outs_);
  for (size_t i = 0; i < side_n; ++i) {
    if (err && i + 1 == side_n) {
      cur_node_ = side_[i].op->node;
      std::rethrow_exception(err);
    }
    st_->runner_store(pos_, side_[i].outs);
    side_[i].outs.clear();
    advance();
  }
  return 1 + side_n;
}

}  // namespace terra::runtime
