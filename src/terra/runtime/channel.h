// What the host (skeleton program) and the GraphRunner share for one step, and the FIFO of
// messages from host to runner: path choices, loop conditions, feeds/validations, step markers.
#pragma once
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <bit>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "terra/core/op.h"
#include "terra/core/wait.h"

namespace terra::graph {
struct SymbolicGraph;
}
namespace terra::trace {
class TraceGraph;
}

namespace terra::runtime {

// Outputs of one op instance, shared with the host's placeholders. `error` is set instead of the
// values when the op (or one before it in its step) failed: reading the cell re-raises it.
struct ValueCell {
  TensorList values;  // pooled: lazy mode makes a cell per op call
  std::exception_ptr error;
};

// Re-raises `err` as the same exception type with `context` appended to its message (the user's
// call site of the op that failed on the runner); types it does not know are rethrown unchanged.
[[noreturn]] void rethrow_with_context(std::exception_ptr err, const std::string& context);

// A lock for a few instructions of work taken by the host and the runner on every op: a waiter
// spins instead of sleeping in the kernel (a futex round trip costs more than the whole section).
class SpinLock {
 public:
  void lock() {
    for (int i = 0; flag_.exchange(true, std::memory_order_acquire); ++i)
      while (flag_.load(std::memory_order_relaxed)) {
        if (++i < 64) __builtin_ia32_pause();
        else sched_yield();  // the holder may be preempted (a loaded machine): let it run
      }
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

class Channel;
struct ChunkPool;  // slot chunks and drop lists of ended steps, reused (channel.cpp)

// Position p's values, written by the runner alone while it runs the step: the host never writes
// this line before the runner is done with the step, so storing an op's outputs moves no cache line
// from the host's core (it did on every op while one slot held both sides, a quarter of each
// thread's time per op). The host reads it only once the runner finished p (done > p), or at a
// fetch, a settle or a feed.
struct SlotChunk;
struct alignas(64) SlotValues {
  ValueCell cell;  // (cell.error unused: a failed step's error is StepState::error_at)
  // Runner-private, valid while `tag` is its step's (StepState::tag_; another tag reads as
  // untouched, so an ended step leaves them as they are): p was stored (runner_store), and the
  // outputs the host dropped before that (bit k: output k, kAllDead: the position), which the
  // store then skips.
  uint64_t tag = 0;
  uint32_t dead_mask = 0;
  bool stored = false;
  SlotChunk* chunk = nullptr;  // whose `live` counts this one while it holds values
  // Taken only once the runner is done with the step, by the threads that then free dead values:
  // two placeholders of one position dying on two threads would otherwise clear it together.
  SpinLock mu;
  static constexpr uint32_t kAllDead = ~0u;
};

// A placeholder on its position's list (SkelPending is one): once the step finished, the host
// walks the step's slots to settle the placeholders still alive, instead of registering every
// placeholder it makes (a weak reference per op: three locked operations, and every dead
// placeholder's block held until the step was settled).
struct SlotLink {
  SlotLink* next_in_slot = nullptr;  // under the slot's mu once its placeholders left the call
};

// The host's record of one position of a co-executed step: its placeholders' references and
// fate. Written by the host (and by a thread dropping the last handle to a placeholder); the
// runner reads it only to decide what a fused group writes out (host_may_read). Slots are pooled
// per step (chunks of kChunk), so an op call allocates no cell and no control block.
struct alignas(64) CellSlot {
  SpinLock mu;  // guards the list of placeholders, and the death, against one dying on another thread
  // Host: the host's placeholders may read it; Dead: every placeholder died (never read again).
  // Atomic: host_cell sets it without the lock, and the runner reads it without it.
  enum State : uint8_t { Untouched, Host, Dead };
  std::atomic<State> state{Untouched};
  // Host-only before its placeholders exist: every output got a placeholder (not the runner's
  // values handed over, not an in-place write's targets), so their deaths are the program's last
  // handles to these values (StepState::ring_drops).
  bool tracked = false;
  // A placeholder took the runner's value into a host tensor (a fetch): that tensor names the
  // value as the placeholder did, so its death no longer tells anything.
  std::atomic<bool> pinned{false};
  // The host's SkelPendings of this position, plus one while the host makes them. Incremented
  // only while already positive; the decrement that reaches 0 kills the slot (StepState::host_drop).
  std::atomic<uint32_t> refs{0};
  uint64_t pos = 0;  // the position (set by host_cell)
  SlotValues* vals = nullptr;  // the position's values (fixed for the chunk's life)
  // The position's live placeholders, linked by the call that makes them (no other thread sees
  // them yet), unlinked under mu by the one that lets each go. Read without mu only to skip
  // empty slots: nothing is added once the call returned.
  std::atomic<SlotLink*> placeholders{nullptr};
};

// A step's slots come in chunks: the host's records and the runner's values in two arrays, so a
// record and a value never share a line.
inline constexpr uint64_t kSlotChunk = 256;
struct SlotChunk {
  CellSlot slots[kSlotChunk];
  SlotValues vals[kSlotChunk];
  // Positions whose `values` are not empty: an ended step clears those (~StepState) without
  // reading the other lines the runner wrote. Written by the runner while it runs the step, by
  // whoever frees a dead position's values after that.
  alignas(64) std::atomic<uint32_t> live{0};
  SlotChunk() {
    for (uint64_t i = 0; i < kSlotChunk; ++i) {
      slots[i].vals = &vals[i];
      vals[i].chunk = this;
    }
  }
};

// An output of a position whose placeholder died while others of the position live: the runner
// does not keep it (a parameter's gradient the host holds must not keep BatchNorm's input
// gradient beside it).
struct DeadOut {
  SlotValues* vals = nullptr;
  uint32_t out = 0;
};

// A value of the runner's ring the program holds no handle to any more: output `out` (or every
// output, Release::kAllOutputs) of position `pos`. Every op that reads it was validated before its
// last handle died, at host position `after` - 1: the runner drops it once it finished those.
struct RingDrop {
  uint64_t pos = 0;
  uint32_t out = 0;
  uint64_t after = 0;
};

struct StepState {
  uint64_t uid = 0;
  std::shared_ptr<const graph::SymbolicGraph> graph;
  std::mutex mu;
  std::condition_variable cv;
  // Guards what the host hands the runner to free (dead_, dead_outs_, ring_drops_, host_frees_)
  // and the growth of the slot directory; a slot's own state has its own lock (CellSlot::mu).
  SpinLock lists_mu;
  // The runner writes `done` after every op and the host writes `host_pos` after every call: each
  // on its own cache line, so neither store takes the line from the other core's reads.
  alignas(64) std::atomic<uint64_t> done{0};       // op instances the runner finished

 private:
  // SlotValues::tag of this step, on the runner's line: the runner reads it per stored or dropped
  // position (in the host's section it missed on every op the host had written that line).
  const uint64_t tag_ = tags_.fetch_add(1, std::memory_order_relaxed) + 1;

 public:
  alignas(64) std::atomic<uint64_t> host_pos{0};   // ops the host validated so far (in-place writes wait for it)
  alignas(64) std::atomic<uint64_t> abort_at{~0ull};  // stop once `done` reaches this (fallback)
  // The runner notifies once `done` reaches it. Several threads may wait on one step (a value read
  // on another thread while the host fetches): it holds the lowest target of those waiting
  // (`waiters`, under mu) and goes back to ~0 only when the last one leaves (wait_step).
  std::atomic<uint64_t> host_waits_for{~0ull};
  uint32_t waiters = 0;
  // The runner's channel, woken when the host starts waiting: a runner holding validated ops of a
  // fused segment while it waits for the rest runs them at once. Used under `mu` while !finished.
  Channel* runner = nullptr;
  std::shared_ptr<std::atomic<int>> host_waiting;  // the runner's count of blocked host threads
  // Written under mu (waits on cv read it there); atomic so a polling wait may read it without mu.
  std::atomic<bool> finished{false};
  // The op that failed and its position: written once, under mu, by runner_fail.
  std::exception_ptr error;
  uint64_t error_pos = 0;
  const trace::TraceGraph* tg = nullptr;  // names the failed op's call site (unchanged while steps run)
  // Host-only: the host is done with this step (ended, aborted or fell back) after validating
  // `validated` ops, and whether the step's error already reached the program.
  bool host_ended = false;
  uint64_t validated = 0;
  bool error_raised = false;
  // Host-only: keys of the random ops the host validated, by position. When the step's error
  // reaches the program before another step began, the generator goes back to the first key past
  // the failed op: eager never reserved those numbers.
  std::vector<std::pair<uint64_t, PhiloxKey>> random_keys;
  void rewind_random();
  // The failure belongs to the program only if the host validated that op; a speculative op past
  // the host's path may fail (or lack an input) just before the host falls back.
  std::exception_ptr error_before(uint64_t validated) {
    std::lock_guard<std::mutex> g(mu);
    return error && error_pos < validated ? error : nullptr;
  }
  // The error of a failed step when position `p`'s op is the one that failed or comes after it
  // (never computed); null otherwise. Lock-free: runner_fail wrote the error before failed_.
  std::exception_ptr error_at(uint64_t p) const {
    return failed_.load(std::memory_order_acquire) && error_pos <= p ? error : nullptr;
  }

  // Host: the slot for position `p`, holding one reference the caller gives back with host_release
  // once its placeholders hold theirs. `ready`: the runner already finished p, so its values are in
  // p's SlotValues (the host may read them). Found from the runner's `done` as last read: reading
  // that line on every op would move it between the cores on every op.
  CellSlot* host_cell(uint64_t p, bool* ready = nullptr);
  // Host (or whoever drops a placeholder's last owner): one reference to `s` less.
  void host_release(CellSlot& s) {
    if (drop_ref(s)) host_drop(s);
  }
  // The same for output `out`'s placeholder (one per output), `leaving` its list (null: already
  // unlinked): when others of the position still live, that output alone dies.
  void host_release_out(CellSlot& s, uint32_t out, SlotLink* leaving = nullptr) {
    if (drop_ref(s)) return host_drop(s, leaving);
    if (leaving) {
      std::lock_guard<SpinLock> g(s.mu);
      unlink(s, leaving);
    }
    host_drop_output(s, out);
  }
  // One reference to s less; true if it was the last. The last holder knows it is (references
  // are added only by a holder, the call making the placeholders): no locked decrement then.
  static bool drop_ref(CellSlot& s) {
    if (s.refs.load(std::memory_order_acquire) == 1) {
      s.refs.store(0, std::memory_order_relaxed);
      return true;
    }
    return s.refs.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
  // Host: position p's record (p < host_pos_mine: its chunk exists), for the settle walk.
  CellSlot& host_slot(uint64_t p) { return slot(p); }
  // Under s.mu: takes `l` off s's list of placeholders.
  static void unlink(CellSlot& s, SlotLink* l) {
    SlotLink* head = s.placeholders.load(std::memory_order_relaxed);
    if (head == l) return s.placeholders.store(l->next_in_slot, std::memory_order_relaxed);
    for (SlotLink* p = head; p; p = p->next_in_slot)
      if (p->next_in_slot == l) {
        p->next_in_slot = l->next_in_slot;
        return;
      }
  }
  // Host: the runner has finished this step; dropped values are freed where they die from now on.
  void host_reclaim();
  // Runner: whether the host holds, or may still create, a placeholder for position `p`'s outputs
  // (false once it validated `p` and every placeholder of it died: a fused group may then keep
  // that value in a tile and never write it out).
  bool host_may_read(uint64_t p);
  // Runner: stores outputs of position `p` where the host may still read them (all but those the
  // host already dropped), after applying the drops the host handed over.
  void runner_store(uint64_t p, const std::vector<Tensor>& outs);
  // Runner: moves the ring drops the host queued since the last call into `into` (appended).
  void runner_take_ring_drops(std::vector<RingDrop>& into);
  bool has_ring_drops() const { return ring_drops_n_.load(std::memory_order_relaxed) != 0; }
  // Runner: the step failed at position `pos` with `err`: reads of that position and later ones
  // raise it (error_at).
  void runner_fail(uint64_t pos, std::exception_ptr err);
  // Host thread: hands the runner the drops it batched. Also done once kHostBatch entries wait
  // (ring drops, dead slots, dead outputs), when the host waits, at the step's end and at
  // host_reclaim; a no-op on any other thread.
  void flush_host_drops() {
    if (on_host_thread() && host_batched() != 0)
      flush_host_drops_slow();
  }
  static constexpr size_t kHostBatch = 8;
  // The thread that runs the step's program (the others only read or drop its values).
  bool on_host_thread() const { return pthread_equal(pthread_self(), host_thread_); }

  StepState() {
    live_.fetch_add(1, std::memory_order_relaxed);
    take_lists();
  }
  // Step states alive in the process (tests: a kept placeholder must not keep its step's state).
  static int64_t live() { return live_.load(std::memory_order_relaxed); }
  StepState(const StepState&) = delete;
  StepState& operator=(const StepState&) = delete;
  ~StepState();

 private:
  static constexpr uint64_t kChunk = kSlotChunk;
  void take_lists();  // the drop lists of an ended step, with their capacity (channel.cpp)
  template <class F>
  void each_list(ChunkPool& pool, F&& f);  // f(pool's lists of a kind, one of ours), for each list
  // Position p's slot; makes the chunks up to it. Lock-free once the chunk exists: the directory
  // below is written only under lists_mu, before nchunks_ grows past the entry (release).
  CellSlot& slot(uint64_t p) { return chunk_at(p).slots[p % kChunk]; }
  // The runner's side of position p (the host's record is not read).
  SlotValues& values_at(uint64_t p) { return chunk_at(p).vals[p % kChunk]; }
  SlotChunk& chunk_at(uint64_t p) {
    const uint64_t c = p / kChunk;
    if (c >= nchunks_.load(std::memory_order_acquire)) grow(p);
    return *chunk(c);
  }
  void grow(uint64_t p);  // makes the chunks up to p's
  // The directory: chunk c lives in page k = floor(log2(c / kPage0 + 1)), which holds
  // kPage0 << k chunks; page 0 is inline (steps of up to kPage0 * kChunk ops allocate none).
  static constexpr uint64_t kPage0 = 16;
  static constexpr int kPages = 40;
  SlotChunk* chunk(uint64_t c) const {
    const int k = int(std::bit_width(c / kPage0 + 1)) - 1;
    const uint64_t off = c - kPage0 * ((uint64_t(1) << k) - 1);
    return k == 0 ? page0_[off] : pages_[k][off];
  }
  SlotChunk* page0_[kPage0] = {};
  SlotChunk** pages_[kPages] = {};
  std::atomic<uint64_t> nchunks_{0};
  // runner_fail stored error/error_pos (release): error_at reads them without mu from then on.
  std::atomic<bool> failed_{false};

  void host_drop(CellSlot& s, SlotLink* leaving = nullptr);  // `leaving` unlinked under s.mu
  void host_drop_output(CellSlot& s, uint32_t out);
  // Runner: frees what the dead slots and outputs hold, or marks positions it has not stored yet.
  void runner_apply_dead(std::vector<SlotValues*>& dead, std::vector<DeadOut>& outs);
  // The runner's view of p's values in this step: reset if an earlier step's tag is on them.
  SlotValues& runner_vals(SlotValues& v) {
    if (v.tag != tag_) {
      v.tag = tag_;
      v.stored = false;
      v.dead_mask = 0;
    }
    return v;
  }
  // Host, once the runner is done with the step: frees them itself.
  static void host_free_dead(std::span<SlotValues* const> dead, std::span<const DeadOut> outs);
  // Empties a position that holds values (`live` with it): on the runner while it runs the step
  // (its one writer: no lock, no locked decrement).
  static void runner_clear(SlotValues& v);
  // The same, or one output only (`out`, DeadOut), once the runner is done with the step: any
  // thread, under v.mu.
  static void host_clear(SlotValues& v, uint32_t out = SlotValues::kAllDead);
  // Dead slots and outputs: the runner frees their values at its next store (malloc frees them
  // on the thread that allocated them, in batches) until host_reclaim.
  std::vector<SlotValues*> dead_;
  std::vector<SlotValues*> runner_dead_;  // the runner's batch being applied (runner only)
  std::vector<DeadOut> dead_outs_;      // single outputs the same way (host_drop_output)
  std::vector<DeadOut> runner_dead_outs_;
  // Set once the runner is done with the step (host_reclaim, under lists_mu); the host thread
  // reads it without the lock (a stale false only sends a drop through the batch).
  std::atomic<bool> host_frees_{false};
  std::vector<RingDrop> ring_drops_;  // guarded by lists_mu
  // What the runner reads without the lock, on a line the host writes only when it hands over a
  // batch: the ring drops queued and the dead slots and values waiting for it.
  alignas(64) std::atomic<uint32_t> ring_drops_n_{0};
  std::atomic<uint32_t> dead_n_{0};
  // The host thread's drops, handed over in batches (flush_host_drops): a placeholder dies on
  // nearly every op call, and taking lists_mu for each moved its line between the cores.
  alignas(64) const pthread_t host_thread_ = pthread_self();

 public:
  // The host's own copy of host_pos, on a line of the host's, for the host's reads: the runner
  // polls host_pos while it waits for the host, and a read of it on every dropped placeholder
  // stalled the host.
  uint64_t host_pos_mine = 0;

 private:
  // The drops batched on the host thread, in arrays of its own, copied to the runner's lists in
  // one burst per batch (hand_over). Vectors swapped with the runner's lists came back holding
  // lines of the runner's core: perf put the pushes' store misses on the host's next locked
  // operation.
  RingDrop host_ring_[kHostBatch];
  SlotValues* host_dead_[kHostBatch];
  DeadOut host_dead_outs_[kHostBatch];
  uint32_t host_ring_n_ = 0, host_dead_n_ = 0, host_dead_outs_n_ = 0;
  uint64_t host_done_seen_ = 0;     // the runner's `done` as the host last read it (host_cell)
  bool host_runner_ahead_ = false;  // and whether it was past the host's position then
  // Whether the death of s's output `out` (or all of them) is a ring drop, and which (d).
  bool ring_drop(const CellSlot& s, uint32_t out, RingDrop& d) const;
  // Gives the runner these drops under lists_mu; false once it is done with the step (host_frees_):
  // the caller frees the values where they dropped.
  bool hand_over(std::span<const RingDrop> ring, std::span<SlotValues* const> dead, std::span<const DeadOut> outs);
  size_t host_batched() const { return host_ring_n_ + host_dead_n_ + host_dead_outs_n_; }
  void flush_host_drops_slow();
  static inline std::atomic<int64_t> live_{0};
  static inline std::atomic<uint64_t> tags_{0};
};

// Counts this host thread as blocked on the runner while it lives (GraphRunner::host_waiting).
class HostWaiting {
 public:
  explicit HostWaiting(std::atomic<int>* count) : count_(count) {
    if (count_) count_->fetch_add(1, std::memory_order_relaxed);
  }
  ~HostWaiting() {
    if (count_) count_->fetch_sub(1, std::memory_order_relaxed);
  }
  HostWaiting(const HostWaiting&) = delete;
  HostWaiting& operator=(const HostWaiting&) = delete;

 private:
  std::atomic<int>* count_;
};

// Thrown by a feed whose producer failed: the runner passes the producer's error on unchanged.
struct PropagatedError {
  std::exception_ptr error;
};

// A feed: a host tensor, or a value of an earlier step the host only holds a placeholder for.
struct FeedValue {
  Tensor tensor;
  std::shared_ptr<ValueCell> cell;
  uint32_t out = 0;
  const StepState* step = nullptr;  // with `cell`: the producer's step and position (its error)
  uint64_t pos = 0;
  // Raises the producer's error if it failed (the same exception object: a value that depended
  // on a failed op re-raises that op's error, never an internal one).
  Tensor resolve() const;
};

struct Message {
  enum Kind : uint8_t { StepBegin, Choice, LoopCond, Validate, StepEnd, Abort, Shutdown } kind;
  uint32_t id = 0;     // switch id, loop node id or op node id
  uint64_t seq = 0;    // host position when sent
  uint32_t value = 0;  // case index (kSkipped: the path did not pass this switch) / 1 = iterate, 0 = exit
  static constexpr uint32_t kSkipped = ~0u;
  std::vector<FeedValue> feeds;  // Validate: per input (set for fed inputs)
  std::vector<uint32_t> phi;     // Validate: per input, chosen candidate for phi inputs (may exceed 255)
  Attrs attrs;                   // Validate of a node with symbolic attributes: the call's own
  PhiloxKey rng;
  std::shared_ptr<StepState> step;  // StepBegin
};

// TERRA_DEBUG_PROTOCOL=1 logs every message and runner action to stderr (engine debugging). Read
// as libterra loads: both threads ask on every op, and a function-local static cost a call and a guard.
namespace detail {
extern const bool g_debug_protocol;
}
inline bool debug_protocol() { return detail::g_debug_protocol; }

// A phi_predicted node's choices in the last message for it in a step (graph::OpNode::phi_predicted).
// The host keeps what it sent and the runner what it took, so both know what a position validated
// without a message repeats.
struct PhiChoices {
  uint64_t step = 0;  // the step's uid
  std::vector<uint32_t> phi;
  bool repeats(uint64_t s, const std::vector<uint32_t>& p) const { return step == s && phi == p; }
  void record(uint64_t s, const std::vector<uint32_t>& p) {
    step = s;
    phi.assign(p.begin(), p.end());
  }
};

// Host -> runner FIFO: single producer (the session's host thread), single consumer (the runner).
// Lock-free: messages live in recycled blocks of slots filled and read in place, so a message
// costs no allocation and no lock in steady state. The consumer spins briefly when empty, then
// sleeps; the producer makes a wake-up syscall only when the consumer is asleep.
class Channel {
 public:
  Channel();
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Producer: the next slot, cleared (filling it and not committing discards it), then commit().
  Message& back();
  void commit();
  void push(Message m);  // back() = m; commit()
  uint64_t sent() const { return committed_; }  // producer side: messages committed so far

  // Consumer: the oldest message, blocking until there is one; pop() releases it.
  Message& front();
  void pop();
  bool empty() const { return pushed_.load(std::memory_order_acquire) == popped_; }  // consumer side
  double waited_s() const { return waited_s_.load(std::memory_order_relaxed); }

  // Producer: wakes the consumer if it sleeps, after publishing state it waits on outside the
  // FIFO with a seq_cst store (StepState::abort_at).
  void notify();
  // Producer: stores `v` into a word the consumer waits on (pushed_, StepState::host_pos), then
  // wakes the consumer if it sleeps. The store is not a full fence: see heavy_barrier (wait.h).
  void publish(std::atomic<uint64_t>& word, uint64_t v) {
    store_before_sleep_check(word, v, light_);
    notify();
  }
  // Producer: the next message is far off (the host traces a step eagerly): a consumer that runs
  // out of messages sleeps at once instead of spinning on a core the producer's kernels need.
  // Cleared by the producer before it sends again.
  void expect_quiet(bool quiet) { quiet_.store(quiet, std::memory_order_relaxed); }
  // Consumer: blocks until ready() holds (spin, then sleep until commit() or notify()).
  template <class F>
  void wait_until(F&& ready) {
    if (!ready()) wait_slow([&] { return ready(); });
  }

 private:
  void wait_slow(const std::function<bool()>& ready);
  static constexpr uint32_t kBlock = 256;
  struct Block {
    Message slots[kBlock];
    Block* next = nullptr;
  };

  // producer side
  Block* tail_;
  uint32_t tail_idx_ = 0;
  uint64_t committed_ = 0;
  // consumer side (a line apart from the producer's: each writes its own per message)
  alignas(64) Block* head_;
  uint32_t head_idx_ = 0;
  uint64_t popped_ = 0;
  // shared, by who writes them: the producer's per-message count on a line of its own; the
  // sleep handshake, which the producer reads per publish and each side writes only around a
  // sleep, on another (it shared a line with waited_s_, which the consumer wrote after every wait:
  // the producer's next publish then waited for that line).
  alignas(64) std::atomic<uint64_t> pushed_{0};  // written per message by the producer
  alignas(64) std::atomic<uint32_t> wake_{0};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> quiet_{false};
  const bool light_;  // producers publish without a full fence; a sleeping consumer fences for them
  // Consumed blocks handed back for reuse. A host running a step or two ahead of the runner has
  // several blocks in flight; keeping one spare made every further block a fresh one whose
  // slots' feed and phi vectors then allocated per message (~1 malloc an op in a loop).
  static constexpr int kSpares = 8;
  std::atomic<Block*> spares_[kSpares] = {};
  alignas(64) std::atomic<double> waited_s_{0};  // consumer-side blocking time (written by the runner only)
};

}  // namespace terra::runtime
