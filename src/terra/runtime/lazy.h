// Lazy mode (the LazyTensor baseline): op calls are recorded into a pending graph and return
// placeholders; a barrier (a fetch, or the step's end) runs the pending graph synchronously. Its
// structure (ops, attributes, input wiring) is looked up by a canonical hash in a cache of blocks:
// a block holds what the barrier derives from the structure alone (who reads which value last), so
// a repeated step derives nothing again. Runs of elementwise ops become fused kernels
// (compile/fused_elementwise.h) whose intermediates nobody holds, and every value is let go after
// its last reader in the batch unless the program still holds it, so a batch's memory peaks where
// eager's does. Recording allocates nothing per op in steady state beyond the placeholders: the
// batch's inputs live in flat arrays that keep their capacity from one barrier to the next.
#pragma once
#include <atomic>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "terra/compile/fused_elementwise.h"
#include "terra/core/dispatch.h"
#include "terra/runtime/channel.h"
#include "terra/runtime/engine.h"

namespace terra::runtime {

// A lazy op call's outputs, shared by its placeholders; `ready` once its batch ran (values or error).
struct LazyCell : ValueCell {
  std::atomic<bool> ready{false};
};

class LazyExec : public Executor {
 public:
  explicit LazyExec(Stats& stats);
  ~LazyExec();  // runs what is owed: placeholders may outlive the engine
  TensorList run(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                 const TensorMetas& meta, PhiloxKey rng) override;
  void on_fetch(const Tensor& t) override;
  // Evaluates everything pending, in program order. An op that fails stops it there, as eager
  // stops at that op: its cell and every later one carry the error (reading them re-raises it);
  // `raise` rethrows it here too (and an error a barrier run on another thread found).
  void barrier(bool raise = true);
  // Makes `cell` (of batch `batch` of `exec`) ready, on any thread: a value read on another thread
  // than the engine's runs the barrier there, under the engine's lock (the engine may be gone).
  static void compute(LazyExec* exec, uint64_t batch, const LazyCell& cell);

 private:
  void barrier_locked(bool raise);
  bool owed_elsewhere(const TensorImpl& t) const;
  struct Ref {  // an input: output `out` of pending entry `entry`, or an outside tensor (entry -1)
    int32_t entry = -1;
    uint32_t out = 0;
    bool operator==(const Ref&) const = default;
  };
  struct Entry {
    const OpDef* op;
    Attrs attrs;
    uint32_t in_first = 0, n_in = 0;  // its input slots: Batch::inputs / refs [in_first, in_first + n_in)
    PhiloxKey rng;
    std::shared_ptr<LazyCell> cell;
    TensorMetas meta;  // the outputs as inferred at the call: the barrier does not infer again
    DType out_dtype() const { return meta.empty() ? DType::Float32 : meta[0].dtype; }
  };
  // The pending graph: entries in call order and their input slots, flat.
  struct Batch {
    std::vector<Entry> entries;
    std::vector<Tensor> inputs;  // per slot: the tensor as called (this batch's placeholder, or an outside value)
    std::vector<Ref> refs;       // per slot: the entry output it reads, or entry -1
    void clear() {
      entries.clear();
      inputs.clear();
      refs.clear();
    }
  };
  // A run of entries [start, end) fused at a barrier, kept for the next barrier of the same block.
  struct FusedRun {
    size_t end = 0;
    std::vector<Attrs> attrs;        // the entries' attributes, owned: the kernel's ops point at them
    compile::FusedKernel kernel;     // its generated code and tile views stay with it
    std::vector<int32_t> ext;        // per kernel slot: the batch input slot it reads, or -1 (an output)
    std::vector<uint32_t> out_slot;  // per entry of the run: the slot it writes
  };
  // What a barrier derives from a batch's structure alone, made on a cache miss. Outputs are
  // numbered first[j] + out. The wiring it was made for is kept and compared on every hit, so a
  // hash collision costs a rebuild, never a wrong release.
  struct Block {
    std::vector<Ref> refs;             // the batch's wiring, as Batch::refs
    std::vector<uint32_t> in_first;    // per entry: its first input slot, as Entry::in_first
    std::vector<uint32_t> first;       // per entry (+1): its first output's number
    std::vector<int32_t> last_use;     // per output: the last entry reading it, or -1
    std::vector<int32_t> reads;        // per output: input slots of the batch reading it
    std::vector<int32_t> first_read;   // per output: the slot of its first reader, or -1
    std::vector<uint32_t> seen;        // per entry: its outputs the batch reads
    // Per entry: the fused run planned from it at an earlier barrier (run_fused_from), and whether
    // none can start there whatever the operands (an unfusible op there or next).
    std::vector<std::unique_ptr<FusedRun>> fused_at;
    std::vector<uint8_t> no_run;
    bool matches(const Batch& b) const;
    void build(const Batch& b);
  };
  static uint64_t canonical_hash(const Batch& b);
  // The value input slot `slot` reads: an earlier entry's output, or the tensor as called.
  static const Tensor& operand(const Batch& b, uint32_t slot);
  // Whether an outside operand can join a fused run over n elements: computed, and full-size
  // contiguous or a broadcast scalar.
  static bool fits_run(const TensorImpl& t, int64_t n);
  // Whether anything but this batch's entries can still read output `out` of entry j: the
  // program, autograd saving it for backward, a detached copy sharing its pending value.
  static bool held_outside(const Batch& b, const Block& block, size_t j, uint32_t out);
  // Drops the batch's references to the values entries [k, m) read for the last time (and to
  // their own outputs nobody reads), once they have run.
  static void release_after(Batch& b, const Block& block, size_t k, size_t m);
  // Runs entries [k, end) as one fused kernel when two or more from k can be; returns end (k: not fused).
  size_t run_fused_from(Batch& b, Block& block, size_t k);
  // Runs a planned run from k if this call's operands fit it; returns its end, or k.
  size_t run_planned(Batch& b, const Block& block, size_t k, FusedRun& p);

  Stats& stats_;
  // Taken by the engine's thread per call and barrier, and by another thread that reads a value
  // still owed (compute): recording and barriers never overlap. A spin lock: one locked operation
  // per call, and contended only while another thread runs a barrier (the waiter yields).
  SpinLock mu_;
  const std::thread::id owner_ = std::this_thread::get_id();
  std::exception_ptr owed_error_;  // found by a barrier run on another thread, raised at the next one here
  uint32_t pins_ = 0;              // threads inside compute for this engine (guarded by the registry's lock)
  Batch pending_;
  Batch spare_;  // the last batch, emptied: its capacity serves the next
  uint64_t batch_ = 0;
  std::unordered_map<uint64_t, Block> cache_;
};

}  // namespace terra::runtime
