// Lazy mode (the LazyTensor baseline): op calls are recorded into a pending graph and return
// placeholders; a barrier (a fetch, or the step's end) runs the pending graph synchronously: its
// input wiring is looked up by a canonical hash in a cache of blocks, runs of elementwise ops
// become fused kernels (compile/fused_elementwise.h) whose intermediates nobody holds, and every
// value is let go after its last reader in the batch unless the program still holds it, so a
// batch's memory peaks where eager's does.
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "terra/core/dispatch.h"
#include "terra/runtime/channel.h"
#include "terra/runtime/engine.h"

namespace terra::runtime {

class LazyExec : public Executor {
 public:
  explicit LazyExec(Stats& stats) : stats_(stats) {}
  ~LazyExec() { barrier(/*raise=*/false); }  // placeholders may outlive the engine: none stays owed
  TensorList run(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                 TensorMetas& meta, PhiloxKey rng) override;
  void on_fetch(const Tensor& t) override;
  // Evaluates everything pending, in program order. An op that fails stops it there, as eager
  // stops at that op: its cell and every later one carry the error (reading them re-raises it);
  // `raise` rethrows it here too.
  void barrier(bool raise = true);
  uint64_t batch() const { return batch_; }

 private:
  struct Ref {  // an input: output `out` of pending entry `entry`, or an outside tensor
    int32_t entry = -1;
    uint32_t out = 0;
  };
  struct Entry {
    const OpDef* op;
    Attrs attrs;
    std::vector<Tensor> inputs;
    std::vector<Ref> refs;
    PhiloxKey rng;
    std::shared_ptr<ValueCell> cell;
    TensorMetas meta;  // the outputs as inferred at the call: the barrier does not infer again
    DType out_dtype() const { return meta.empty() ? DType::Float32 : meta[0].dtype; }
  };
  struct Block {  // a compiled pending graph: ops in order with resolved input slots
    std::vector<std::vector<Ref>> refs;
  };
  static uint64_t canonical_hash(const std::vector<Entry>& entries);
  // Who in a batch reads which output, built once per barrier: for the fusion decisions and for
  // letting values go after their last reader. Outputs are numbered first[j] + out.
  struct BatchUses {
    std::vector<uint32_t> first;               // per entry: its first output's number
    std::vector<int32_t> last_use;             // per output: the last entry reading it, or -1
    std::vector<int32_t> reads;                // per output: input slots of the batch reading it
    std::vector<const Tensor*> placeholder;    // per output: its placeholder as a later entry holds it
    std::vector<uint32_t> seen;                // per entry: outputs with such a placeholder
    void build(const std::vector<Entry>& work, const Block& block);
    // Whether anything but this batch's entries can still read output `out` of entry j.
    bool held_outside(const std::vector<Entry>& work, size_t j, uint32_t out) const;
  };
  // Drops the batch's references to the values entries [k, m) read for the last time (and to
  // their own outputs nobody reads), once they have run.
  void release_after(std::vector<Entry>& work, const Block& block, size_t k, size_t m, const BatchUses& uses);
  // Runs entries [k, end) as one fused kernel when two or more from k can be; returns end (k: not fused).
  size_t run_fused_from(std::vector<Entry>& work, const Block& block, size_t k, const BatchUses& uses);

  Stats& stats_;
  std::vector<Entry> pending_;
  std::vector<Entry> spare_;  // the last batch's emptied vector: its capacity serves the next
  uint64_t batch_ = 0;
  std::unordered_map<uint64_t, Block> cache_;
};

}  // namespace terra::runtime
