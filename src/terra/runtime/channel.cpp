#include "terra/runtime/channel.h"

#include "terra/core/allocator.h"
#include "terra/core/random.h"
#include "terra/core/wait.h"
#include "terra/graph/symbolic_graph.h"

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <stdexcept>

namespace terra::runtime {

// Chunks of slots of ended steps, reused by later ones: a slot keeps its values' capacity, so the
// runner's store of an op's outputs allocates nothing in steady state (and no chunk is made per step).
// The same for a step's drop lists (StepState's host_*, ring_drops_, dead_*): each step started
// them empty, and filling them cost ~25 mallocs a step (the batches swap buffers between the
// host, the step and the runner, so every list of a new step grew from nothing).
struct ChunkPool {
  static constexpr size_t kMax = 64;  // chunks kept (the steps in flight need a few each)
  static constexpr size_t kMaxLists = 32;  // lists kept per kind (a step takes two or three)
  std::mutex mu;
  std::vector<SlotChunk*> free;
  std::vector<std::vector<RingDrop>> rings;
  std::vector<std::vector<SlotValues*>> slot_lists;
  std::vector<std::vector<DeadOut>> out_lists;
};

namespace {
template <class V>
void take_list(std::vector<V>& kept, V& v) {
  if (kept.empty()) return;
  v.swap(kept.back());
  kept.pop_back();
}
template <class V>
void give_list(std::vector<V>& kept, V& v) {
  if (v.capacity() != 0 && kept.size() < ChunkPool::kMaxLists) kept.push_back(std::move(v));
}
ChunkPool& chunk_pool() {
  static ChunkPool* p = new ChunkPool;  // leaked: steps may end during static destruction
  return *p;
}
}  // namespace

// Every drop list of the step with the pool's lists of its kind: f(kept, list). The one place that
// names them, so a list added later is pooled (and cleared) with the others.
template <class F>
void StepState::each_list(ChunkPool& pool, F&& f) {
  f(pool.rings, ring_drops_);
  for (auto* v : {&dead_, &runner_dead_}) f(pool.slot_lists, *v);
  for (auto* v : {&dead_outs_, &runner_dead_outs_}) f(pool.out_lists, *v);
}

void StepState::take_lists() {
  ChunkPool& pool = chunk_pool();
  std::lock_guard<std::mutex> g(pool.mu);
  each_list(pool, [](auto& kept, auto& v) { take_list(kept, v); });
}

StepState::~StepState() {
  live_.fetch_sub(1, std::memory_order_relaxed);
  ChunkPool& pool = chunk_pool();
  {
    each_list(pool, [](auto&, auto& v) { v.clear(); });  // values die outside the lock
    std::lock_guard<std::mutex> g(pool.mu);
    each_list(pool, [](auto& kept, auto& v) { give_list(kept, v); });
  }
  const uint64_t n = nchunks_.load(std::memory_order_acquire);
  for (uint64_t k = 0; k < n; ++k) {
    SlotChunk* c = chunk(k);
    for (uint64_t i = 0; i < kChunk; ++i) {  // as new: no value, no reference
      // A record nobody touched is still as new (host_cell sets its state before anything
      // else). A short step leaves most of its chunk so.
      CellSlot& s = c->slots[i];
      if (s.state.load(std::memory_order_relaxed) != CellSlot::Untouched) {
        s.refs.store(0, std::memory_order_relaxed);
        s.state.store(CellSlot::Untouched, std::memory_order_relaxed);
        s.tracked = false;
        s.pinned.store(false, std::memory_order_relaxed);
      }
    }
    // The runner's lines: only positions still holding values (placeholders kept to the end,
    // values the runner never learned were dead) are read; its flags go stale with the tag.
    for (uint64_t i = 0; i < kChunk && c->live.load(std::memory_order_relaxed) != 0; ++i)
      if (!c->vals[i].cell.values.empty()) host_clear(c->vals[i]);
    std::lock_guard<std::mutex> g(pool.mu);
    if (pool.free.size() < ChunkPool::kMax) pool.free.push_back(c);
    else delete c;
  }
  for (SlotChunk** page : pages_) delete[] page;
}

void StepState::grow(uint64_t p) {
  std::lock_guard<SpinLock> g(lists_mu);
  for (uint64_t n = nchunks_.load(std::memory_order_relaxed); n <= p / kChunk; ++n) {
    SlotChunk* c = nullptr;
    {
      ChunkPool& pool = chunk_pool();
      std::lock_guard<std::mutex> pg(pool.mu);
      if (!pool.free.empty()) {
        c = pool.free.back();
        pool.free.pop_back();
      }
    }
    if (!c) c = new SlotChunk;
    const int k = int(std::bit_width(n / kPage0 + 1)) - 1;
    const uint64_t off = n - kPage0 * ((uint64_t(1) << k) - 1);
    if (k >= kPages) throw std::length_error("[coexec] a step of more than 2^48 op calls");
    if (k == 0) {
      page0_[off] = c;
    } else {
      if (!pages_[k]) pages_[k] = new SlotChunk*[kPage0 << k]();
      pages_[k][off] = c;
    }
    nchunks_.store(n + 1, std::memory_order_release);  // publishes the entry to lock-free readers
  }
}

CellSlot* StepState::host_cell(uint64_t p, bool* ready) {
  CellSlot& s = slot(p);
  // No lock: no placeholder of p exists yet, and the runner reads the state only for positions
  // the host published (host_pos, after this).
  s.pos = p;
  s.refs.store(1, std::memory_order_relaxed);  // the caller's, until its placeholders hold theirs
  s.state.store(CellSlot::Host, std::memory_order_relaxed);
  if (ready) {
    // While the runner trails the host, its count is read again only every 16 positions: a read
    // per op would take the line it writes per op from its core every time.
    if (p >= host_done_seen_ && (host_runner_ahead_ || p % 16 == 0)) {
      host_done_seen_ = done.load(std::memory_order_acquire);
      host_runner_ahead_ = p < host_done_seen_;
    }
    // Finished (stored before `done` passed p, release): nothing drops p's values before the host
    // made placeholders for them, so they are all there.
    *ready = p < host_done_seen_ && !s.vals->cell.values.empty();
  }
  return &s;
}

bool StepState::ring_drop(const CellSlot& s, uint32_t out, RingDrop& d) const {
  if (!s.tracked || s.pinned.load(std::memory_order_acquire)) return false;
  // +1: a handle may die inside the call that reads it, before that call counts as validated.
  d = {s.pos, out, (on_host_thread() ? host_pos_mine : host_pos.load(std::memory_order_acquire)) + 1};
  return true;
}

bool StepState::hand_over(std::span<const RingDrop> ring, std::span<SlotValues* const> dead, std::span<const DeadOut> outs) {
  std::lock_guard<SpinLock> g(lists_mu);
  if (host_frees_.load(std::memory_order_relaxed)) return false;
  ring_drops_.insert(ring_drops_.end(), ring.begin(), ring.end());
  dead_.insert(dead_.end(), dead.begin(), dead.end());
  dead_outs_.insert(dead_outs_.end(), outs.begin(), outs.end());
  ring_drops_n_.store(uint32_t(ring_drops_.size()), std::memory_order_relaxed);
  dead_n_.store(uint32_t(dead_.size() + dead_outs_.size()), std::memory_order_relaxed);
  return true;
}

// Appends `from` to `to` and empties it; where `to` is empty (the runner took the last batch, the
// usual case) the two swap buffers, so a flush moves no entries and both keep their capacity.
template <class V>
static void append_batch(V& to, V& from) {
  if (to.empty()) to.swap(from);
  else to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  from.clear();
}

void StepState::flush_host_drops_slow() {
  const std::span<SlotValues* const> dead(host_dead_, host_dead_n_);
  const std::span<const DeadOut> outs(host_dead_outs_, host_dead_outs_n_);
  if (!hand_over({host_ring_, host_ring_n_}, dead, outs))
    host_free_dead(dead, outs);  // the runner is done with the step: freed here
  host_ring_n_ = host_dead_n_ = host_dead_outs_n_ = 0;
}

void StepState::runner_take_ring_drops(std::vector<RingDrop>& into) {
  std::lock_guard<SpinLock> g(lists_mu);
  append_batch(into, ring_drops_);
  ring_drops_n_.store(0, std::memory_order_relaxed);
}

void StepState::host_drop(CellSlot& s, SlotLink* leaving) {
  {
    std::lock_guard<SpinLock> g(s.mu);
    if (leaving) unlink(s, leaving);
    s.state.store(CellSlot::Dead, std::memory_order_relaxed);  // fused groups need not write it out (host_may_read)
  }
  // Whether the runner stored values there is its own business: it frees them, or skips the
  // store, when it takes the drop (runner_apply_dead).
  RingDrop d;
  const bool ring = ring_drop(s, graph::Release::kAllOutputs, d);
  if (on_host_thread() && !host_frees_.load(std::memory_order_relaxed)) {
    if (ring) host_ring_[host_ring_n_++] = d;  // (each count stays <= kHostBatch: flushed at kHostBatch in all)
    host_dead_[host_dead_n_++] = s.vals;  // (the runner's side: the runner never reads the host's record)
    if (host_batched() >= kHostBatch) flush_host_drops_slow();
    return;
  }
  SlotValues* dead = s.vals;
  if (!hand_over({&d, ring}, {&dead, 1}, {})) host_clear(*dead);  // the runner is done with the step
}

void StepState::host_drop_output(CellSlot& s, uint32_t out) {
  if (out >= 32) return;  // kept with the position (ops with that many outputs are rare)
  RingDrop d;
  const bool ring = ring_drop(s, out, d);
  const DeadOut dead{s.vals, out};
  if (on_host_thread() && !host_frees_.load(std::memory_order_relaxed)) {
    if (ring) host_ring_[host_ring_n_++] = d;
    host_dead_outs_[host_dead_outs_n_++] = dead;  // the runner frees it (as dead_)
    if (host_batched() >= kHostBatch) flush_host_drops_slow();
    return;
  }
  // The runner is done with the step: freed here. Other placeholders of the position may read
  // their own outputs on other threads; only this element changes.
  if (!hand_over({&d, ring}, {}, {&dead, 1})) host_clear(*s.vals, out);
}

void StepState::runner_clear(SlotValues& v) {
  v.cell.values.clear();  // capacity kept
  std::atomic<uint32_t>& live = v.chunk->live;
  live.store(live.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

void StepState::host_clear(SlotValues& v, uint32_t out) {
  Tensor last;  // freed outside the lock
  std::lock_guard<SpinLock> g(v.mu);
  TensorList& vals = v.cell.values;
  if (out != SlotValues::kAllDead) {
    if (out < vals.size()) last = std::move(vals[out]);
  } else if (!vals.empty()) {
    vals.clear();
    v.chunk->live.fetch_sub(1, std::memory_order_relaxed);
  }
}

void StepState::runner_apply_dead(std::vector<SlotValues*>& dead, std::vector<DeadOut>& outs) {
  for (SlotValues* p : dead) {
    SlotValues& v = runner_vals(*p);
    if (!v.stored) v.dead_mask = SlotValues::kAllDead;
    else if (!v.cell.values.empty()) runner_clear(v);
  }
  for (const DeadOut& d : outs) {
    SlotValues& v = runner_vals(*d.vals);
    if (!v.stored) v.dead_mask |= uint32_t(1) << d.out;
    else if (d.out < v.cell.values.size()) v.cell.values[d.out] = Tensor();
  }
  dead.clear();
  outs.clear();
}

void StepState::host_free_dead(std::span<SlotValues* const> dead, std::span<const DeadOut> outs) {
  for (SlotValues* v : dead) host_clear(*v);
  for (const DeadOut& d : outs) host_clear(*d.vals, d.out);  // only this element: others may be read
}

void StepState::host_reclaim() {
  flush_host_drops();
  std::vector<SlotValues*> dead;
  std::vector<DeadOut> outs;
  {
    std::lock_guard<SpinLock> g(lists_mu);
    if (host_frees_) return;
    host_frees_.store(true, std::memory_order_relaxed);
    dead.swap(dead_);
    outs.swap(dead_outs_);
    dead_n_.store(0, std::memory_order_relaxed);
  }
  host_free_dead(dead, outs);
}

void StepState::runner_fail(uint64_t pos, std::exception_ptr err) {
  {
    std::lock_guard<std::mutex> g(mu);
    error = err;
    error_pos = pos;
  }
  failed_.store(true, std::memory_order_release);  // error_at reads them from here on
}

void StepState::rewind_random() {
  uint64_t failed;
  {
    std::lock_guard<std::mutex> g(mu);
    if (!error) return;
    failed = error_pos;
  }
  for (const auto& [pos, key] : random_keys)
    if (pos > failed) {
      set_generator_state({key.seed, key.offset});
      return;
    }
}

Tensor FeedValue::resolve() const {
  if (!cell) return tensor;
  if (step)
    if (std::exception_ptr err = step->error_at(pos)) throw PropagatedError{err};
  if (out >= cell->values.size() || !cell->values[out].defined())
    throw std::runtime_error("[coexec] a value fed to this step was never computed (its step was abandoned)");
  return cell->values[out];
}

namespace {
template <class E>
bool try_rethrow(std::exception_ptr err, const std::string& context) {
  try {
    std::rethrow_exception(err);
  } catch (const E& e) {
    throw E(std::string(e.what()) + context);
  } catch (...) {
  }
  return false;
}
}  // namespace

void rethrow_with_context(std::exception_ptr err, const std::string& context) {
  // Most derived first: the program sees the exception type eager would have raised (OutOfMemory
  // is a runtime_error, which would otherwise catch it: Python would see RuntimeError, not
  // terra.OutOfMemoryError).
  try_rethrow<OutOfMemory>(err, context);
  try_rethrow<std::invalid_argument>(err, context);
  try_rethrow<std::out_of_range>(err, context);
  try_rethrow<std::domain_error>(err, context);
  try_rethrow<std::length_error>(err, context);
  try_rethrow<std::overflow_error>(err, context);
  try_rethrow<std::underflow_error>(err, context);
  try_rethrow<std::range_error>(err, context);
  try_rethrow<std::runtime_error>(err, context);
  try_rethrow<std::logic_error>(err, context);
  std::rethrow_exception(err);
}

bool StepState::host_may_read(uint64_t p) {
  if (p / kChunk >= nchunks_.load(std::memory_order_acquire)) return true;
  // The runner's own copy first: no line of the host's.
  const SlotValues& v = values_at(p);
  if (v.tag == tag_ && v.dead_mask == SlotValues::kAllDead) return false;
  return slot(p).state.load(std::memory_order_relaxed) != CellSlot::Dead;  // stale: written out for nothing
}

void StepState::runner_store(uint64_t p, const std::vector<Tensor>& outs) {
  // The host's drops first: a value whose placeholders all died is then never stored.
  if (dead_n_.load(std::memory_order_relaxed) != 0) {
    {
      std::lock_guard<SpinLock> g(lists_mu);
      runner_dead_.swap(dead_);
      runner_dead_outs_.swap(dead_outs_);
      dead_n_.store(0, std::memory_order_relaxed);
    }
    runner_apply_dead(runner_dead_, runner_dead_outs_);
  }
  SlotValues& v = runner_vals(values_at(p));  // the runner's own line: no lock, nothing of the host's
  v.stored = true;
  if (v.dead_mask == SlotValues::kAllDead || outs.empty()) return;
  v.cell.values.assign(outs.begin(), outs.end());
  // One writer while the runner runs the step: no locked increment.
  v.chunk->live.store(v.chunk->live.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  for (uint32_t m = v.dead_mask; m; m &= m - 1)  // outputs whose placeholder already died
    if (size_t k = size_t(std::countr_zero(m)); k < v.cell.values.size()) v.cell.values[k] = Tensor();
}

const bool detail::g_debug_protocol = std::getenv("TERRA_DEBUG_PROTOCOL") != nullptr;

Channel::Channel() : tail_(new Block), head_(tail_), light_(heavy_barrier_available()) {}

Channel::~Channel() {
  for (Block* b = head_; b;) {
    Block* n = b->next;
    delete b;
    b = n;
  }
  for (auto& b : spares_) delete b.load();
}

static void clear_slot(Message& m) {
  m.kind = Message::Shutdown;
  m.id = 0;
  m.seq = 0;
  m.value = 0;
  m.feeds.clear();  // keeps the capacity: the next message in this slot allocates nothing
  m.phi.clear();
  m.rng = PhiloxKey{};
  m.step.reset();
}

Message& Channel::back() {
  if (tail_idx_ == kBlock) {
    Block* b = nullptr;
    for (int i = 0; i < kSpares && !b; ++i)
      if (spares_[i].load(std::memory_order_relaxed)) b = spares_[i].exchange(nullptr, std::memory_order_acquire);
    if (!b) b = new Block;
    b->next = nullptr;
    tail_->next = b;  // published to the consumer by the commit of the first message in b
    tail_ = b;
    tail_idx_ = 0;
  }
  Message& m = tail_->slots[tail_idx_];
  clear_slot(m);
  return m;
}

void Channel::commit() {
  Message& m = tail_->slots[tail_idx_];
  if (debug_protocol())
    std::fprintf(stderr, "  host -> kind=%d id=%u seq=%llu value=%u\n", int(m.kind), m.id, (unsigned long long)m.seq,
                 m.value);
  tail_idx_++;
  publish(pushed_, ++committed_);
}

void Channel::push(Message m) {
  Message& s = back();
  s.kind = m.kind;
  s.id = m.id;
  s.seq = m.seq;
  s.value = m.value;
  s.rng = m.rng;
  s.step = std::move(m.step);
  if (!m.feeds.empty()) s.feeds.swap(m.feeds);  // never trade the slot's capacity for nothing
  if (!m.phi.empty()) s.phi.swap(m.phi);
  commit();
}

void Channel::notify() {
  if (sleeping_.load(std::memory_order_seq_cst)) {
    wake_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(wake_);
  }
}

void Channel::wait_slow(const std::function<bool()>& ready) {
  auto t0 = std::chrono::steady_clock::now();
  // Spin first: the host usually sends the next message within microseconds, and a sleep costs
  // the host a wake-up syscall per message. Rounds of pauses end in a yield, so on a loaded
  // machine the spinning gives its core to whoever needs it; the budget counts rounds, not time
  // (time passes while preempted), with a wall-clock cap for long idle periods.
  constexpr int kRounds = 256;
  for (int round = 0; !ready(); ++round) {
    if (round < kRounds && !quiet_.load(std::memory_order_relaxed) &&
        std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2)) {
      spin_until(ready, 1);
      continue;
    }
    uint32_t w = wake_.load(std::memory_order_seq_cst);
    sleeping_.store(true, std::memory_order_seq_cst);
    // The producers' stores were only compiler-fenced (publish): make them visible, or have the
    // producer see sleeping_; if the kernel refuses, sleep at most a millisecond at a time.
    const bool fenced = !light_ || heavy_barrier();
    if (!ready()) {
      if (fenced) futex_wait(wake_, w);
      else futex_wait_for(wake_, w, 1000000);
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  waited_s_.store(waited_s_.load(std::memory_order_relaxed) + dt, std::memory_order_relaxed);
}

Message& Channel::front() {
  wait_until([this] { return pushed_.load(std::memory_order_seq_cst) != popped_; });
  if (head_idx_ == kBlock) {
    Block* old = head_;
    head_ = old->next;  // set before the message we saw was committed
    head_idx_ = 0;
    old->next = nullptr;
    for (int i = 0; i < kSpares && old; ++i) {  // keep it for the producer, unless enough are kept
      Block* empty = nullptr;
      if (spares_[i].compare_exchange_strong(empty, old, std::memory_order_acq_rel)) old = nullptr;
    }
    delete old;
  }
  return head_->slots[head_idx_];
}

void Channel::pop() {
  clear_slot(head_->slots[head_idx_]);  // drops references (steps, fed tensors) early
  head_idx_++;
  popped_++;
}

}  // namespace terra::runtime
