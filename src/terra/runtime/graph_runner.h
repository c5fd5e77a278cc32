// The GraphRunner: a thread that executes the symbolic graph on real data, step after step,
// running ahead of the host as far as feeds, path choices and validations allow.
#pragma once
#include <atomic>
#include <memory>
#include <thread>

#include <unordered_map>

#include "terra/graph/symbolic_graph.h"
#include "terra/compile/fusion_plan.h"
#include "terra/core/wait.h"
#include "terra/runtime/channel.h"

namespace terra::runtime {

using compile::BlockPlan;
using compile::FusedSegment;
using compile::FusionSpan;
using compile::OpRecord;
using compile::Readers;

// Runs one op's kernel (the unfused path; fused groups run through compile::run_fused). A plain
// class: the runner owns one, and nothing substitutes it.
class BlockExecutor {
 public:
  // `meta`: the outputs' shapes and dtypes, inferred by the runner once per input signature.
  // `attrs`: the node's, or the call's own for a node with symbolic attributes.
  // Outputs go to `outs` (cleared first): the runner reuses one vector, no allocation per op.
  void run_op(const graph::OpNode& op, std::vector<Tensor>& inputs, const Attrs& attrs, const TensorMetas& meta,
              PhiloxKey rng, std::vector<Tensor>& outs);
};

// Index into a node's ring of recent executions for source `s` read by node `reader`. Ages count
// executions as the host sees them, the current one included; the runner has not pushed the
// current execution yet, so a node reading its own earlier output looks one closer.
inline size_t ring_index(const trace::Source& s, uint32_t reader) {
  return s.node == reader ? size_t(s.age) - 1 : size_t(s.age);
}

// The work (multiply-adds, OpDef::work) from which an op runs side by side: 2^18 by default.
// Tests set it to 0 to run every op that has a work estimate beside the next ones.
void set_side_min_work(int64_t macs);

class GraphRunner {
 public:
  GraphRunner();
  ~GraphRunner();
  Channel& channel() { return ch_; }
  // Steps fully executed; the host compares with the steps it started to bound run-ahead.
  uint64_t steps_finished() const { return steps_finished_.load(); }
  // Host: blocks until `n` steps finished, counted meanwhile as a host waiting (host_waiting()).
  void wait_steps_finished(uint64_t n);
  double busy_s() const { return busy_s_.load(); }
  double stall_s() const { return ch_.waited_s(); }
  double cpu_s() const { return cpu_s_.load(); }
  // TERRA_EXPLAIN: each planned fusion span is described on stderr and in `dir`/fusion.txt.
  void set_explain(const std::string& dir) {
    std::lock_guard<std::mutex> g(mu_);
    explain_dir_ = dir;
  }
  // Host threads blocked waiting for this runner; while none is, the runner's kernels leave the
  // host its core (leave_core_to_host, core/threads.h). Shared: steps and placeholders keep it.
  const std::shared_ptr<std::atomic<int>>& host_waiting() const { return host_waiting_; }
  uint64_t fused_kernels() const { return fused_kernels_.load(std::memory_order_relaxed); }
  uint64_t fused_ops() const { return fused_ops_.load(std::memory_order_relaxed); }
  // Heavy ops that ran on a spare core beside the runner, and the ops the runner ran meanwhile.
  uint64_t side_heavy() const { return side_heavy_.load(std::memory_order_relaxed); }
  uint64_t side_ops() const { return side_ops_.load(std::memory_order_relaxed); }

 private:
  struct Abort {};
  static constexpr uint32_t kNoNode = ~0u;
  void loop();
  void run_step(StepState& st);
  void run_region(const graph::Region& r);
  void run_block(const std::vector<graph::Item>& block);
  void run_op(const graph::OpNode& op, OpRecord* rec = nullptr);
  // run_op after its inputs were read into node_in_ (and its message popped).
  void run_read_op(const graph::OpNode& op, PhiloxKey rng, OpRecord* rec = nullptr);
  // The pieces of run_op. begin_op: waits until the op at position `p` may run (aborts, in-place
  // validation) and returns its message (null when it needs none; the caller pops it).
  Message* begin_op(const graph::OpNode& op, uint64_t p);
  // Fills `in` from rings, variables, feeds and phis; inputs flagged in `skip` are left alone.
  // With `borrow`, ring values come as handles that own nothing (no reference count moves): only
  // for an op that runs at once on this thread and keeps no input (no view, no in-place write),
  // while its ring still holds them.
  void read_inputs(const graph::OpNode& op, const Message* v, std::vector<Tensor>& in, const uint8_t* skip,
                   bool borrow = false);
  // Publishes the outputs of the op at pos_ (cells, ring, releases) and advances pos_.
  void finish_op(const graph::OpNode& op, std::vector<Tensor>& in, std::vector<Tensor>& outs);
  // finish_op's parts: the runner's own bookkeeping (inputs dropped, outputs into the ring, dead
  // values released), then the host's (the position done: pos_ advances, a waiting host wakes).
  // `p`: the op's position (side-by-side ops keep theirs before pos_ reaches it).
  void keep_outputs(const graph::OpNode& op, uint64_t p, std::vector<Tensor>& in, std::vector<Tensor>& outs);
  // Drops the ring values whose last program handle died (StepState ring drops) once every op
  // validated before that death has run.
  void apply_ring_drops();
  // Drops the values no later op of the step reads (OpNode::release_after, Item::release_after_loop).
  void release(const std::vector<graph::Release>& values);
  void advance();
  // Fused groups (runner_fusion.cpp).
  BlockPlan& plan_of(const std::vector<graph::Item>& block);
  void run_span(const std::vector<graph::Item>& block, BlockPlan& plan, size_t span);
  // `first_read`: the segment's first op already has its inputs (run_span read them to pick a plan).
  // Returns false when the recorded shapes no longer hold (the ops ran unfused; drop the plan).
  bool run_segment(const std::vector<graph::Item>& block, FusedSegment& seg, bool first_read);
  // Runs ops [seg.begin, seg.begin + count) one by one after their inputs were gathered.
  // Whether every input read_inputs would take from a ring is there (skip: inputs not read).
  bool inputs_present(const graph::OpNode& op, const Message* v, const uint8_t* skip);
  // Whether begin_op(op, p) would return without waiting for the host.
  bool may_begin(const graph::OpNode& op, uint64_t p) const;
  void run_gathered(const std::vector<graph::Item>& block, const FusedSegment& seg, uint32_t count);
  // Side by side (runner_side.cpp): while a core is spare, the heavy op block[k] runs on a pool
  // worker and the runner runs the ops after it (before `end`) that do not read it; every op's
  // outputs are published in position order. Returns the items it ran (0: run block[k] as usual).
  size_t run_side_by_side(const std::vector<graph::Item>& block, size_t k, size_t end);
  int take_choice(uint32_t sw);
  // The host's next word once it reached position `p`: the channel's front message, or null when
  // the host validated `p` without sending one before.
  Message* word_at(uint64_t p);
  // After a body of the loop ran (the next op would be at pos_): whether the host iterates. Only
  // an exit comes as a message; the host validating pos_ without one means another iteration.
  bool loop_continues(uint32_t loop);
  // For a phi_predicted op at `p`: whether the channel's front is its message (else the op repeats
  // its last choices, phi_last_).
  bool has_validate(const graph::OpNode& op, uint64_t p);
  // The phi choices the op at hand reads: its message's, or its last message's.
  const std::vector<uint32_t>* phi_of(const graph::OpNode& op, const Message* v) const;
  Message& take_validate(uint32_t node, uint64_t p);  // the channel's front; popped by the caller
  [[noreturn]] void wait_for_abort(const std::string& why);
  std::exception_ptr with_call_site(std::exception_ptr err, const StepState& st) const;
  [[noreturn]] void missing_value(const graph::OpNode& op, const trace::Source& s, bool validated);

  // Values of the current step: per node, a ring of its most recent executions (depth max_age + 1).
  // Kept across steps (the slots keep their capacity); values are dropped when a step ends.
  struct Ring {
    std::vector<std::vector<Tensor>> slots;
    uint32_t head = 0, count = 0;
    uint32_t runs = 0;  // pushes this step: run r sits at age runs - 1 - r
    // No modulo: head < size and age < count <= size. A 64-bit divide takes tens of cycles, and
    // the runner made one per input and one per push on every op.
    std::vector<Tensor>* at(size_t age) {
      if (age >= count) return nullptr;
      size_t i = head + age;
      return &slots[i >= slots.size() ? i - slots.size() : i];
    }
    void push_front(std::vector<Tensor>& outs);  // takes outs' tensors
    void clear();
  };
  std::vector<Ring> env_;
  // Per node: output metas for the input shapes/dtypes last seen (the host already checked them;
  // shape inference is a pure function of these, so it runs again only when they change).
  struct MetaCache {
    TensorMetas in, out;
    bool valid = false;
    const TensorMetas& get(const graph::OpNode& op, const std::vector<Tensor>& inputs);
  };
  std::vector<MetaCache> meta_;
  const TensorMetas no_meta_;  // views and in-place ops allocate nothing
  Attrs call_attrs_;           // the current symbolic node's attributes, from its message
  TensorMetas call_meta_;      // and its outputs' metas
  std::vector<uint32_t> touched_;  // nodes whose rings hold values this step
  struct PosRun {
    uint32_t node = kNoNode, run = 0;  // the op at a position, and which of its node's runs it was
  };
  std::vector<PosRun> pos_run_;        // per position of the current step
  std::vector<RingDrop> ring_drops_;   // taken from the step; those from ring_drops_head_ on not yet due
  size_t ring_drops_head_ = 0;
  StepState* st_ = nullptr;
  const graph::SymbolicGraph* g_ = nullptr;
  uint64_t pos_ = 0;
  uint32_t cur_node_ = kNoNode;  // TraceGraph node of the op being run (names a failure's call site)
  BlockExecutor exec_;
  std::vector<std::vector<Tensor>> node_in_;  // per node: the inputs of its latest run (variables kept)
  std::vector<PhiChoices> phi_last_;  // per node id: the last choices taken (the host's mirror)
  // Per node id: executions of a run_predicted node begun in step `step` (its run index, as the
  // host's cursor counts it), and the run of the op begin_op began last (read_inputs' predictions).
  struct Runs {
    uint64_t step = 0;
    uint32_t next = 0;
    uint32_t run = 0;     // of the instance at `pos` (begun again after a side-by-side try: the same run)
    uint64_t pos = ~0ull;
  };
  std::vector<Runs> runs_;
  uint32_t cur_run_ = 0;
  const graph::SymbolicGraph* inputs_graph_ = nullptr;  // the graph node_in_ belongs to
  uint64_t plans_graph_ = 0;  // uid of the graph plans_ and readers_ belong to
  std::unordered_map<const void*, BlockPlan> plans_;     // per basic block of the current graph
  Readers readers_;                                       // of the current graph (built with plans)
  std::vector<Tensor> outs_;  // an op's outputs; swapped into its ring slot, so the two recycle capacity
  std::vector<Tensor> slots_;                             // a fused segment's slot tensors (reused)
  struct SideOp {
    const graph::OpNode* op = nullptr;
    std::vector<Tensor> outs;  // published after the heavy op's
  };
  std::vector<SideOp> side_;  // the ops run beside a heavy one (entries and their lists reused)
  std::vector<Tensor> side_outs_;  // the heavy op's outputs
  std::vector<uint8_t> keep_;                             // per slot: written out (reused)
  std::vector<const TensorImpl*> ext_impls_;              // a segment's outside inputs (reused)
  std::string explain_dir_;                               // guarded by mu_
  void explain_span(const std::vector<graph::Item>& block, const FusionSpan& sp);

  Channel ch_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> steps_finished_{0};
  std::atomic<double> busy_s_{0};
  std::atomic<double> cpu_s_{0};
  std::atomic<uint64_t> fused_kernels_{0}, fused_ops_{0};
  std::atomic<uint64_t> side_heavy_{0}, side_ops_{0};
  std::shared_ptr<std::atomic<int>> host_waiting_ = std::make_shared<std::atomic<int>>(0);
  // `done` is stored after every op with a compiler fence only where the kernel's membarrier
  // works: a host going to sleep on it fences this thread then (wait_step, coexec.cpp).
  const bool light_done_ = heavy_barrier_available();
  std::thread thread_;  // last: starts once the members above are made
};

}  // namespace terra::runtime
