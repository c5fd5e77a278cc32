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
  std::vector<CellSlot*> free;
  std::vector<std::vector<RingDrop>> rings;
  std::vector<std::vector<CellSlot*>> slot_lists;
  std::vector<std::vector<Tensor>> value_lists;
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
  for (auto* v : {&host_ring_, &ring_drops_}) f(pool.rings, *v);
  for (auto* v : {&host_dead_, &dead_, &runner_dead_}) f(pool.slot_lists, *v);
  for (auto* v : {&host_dead_values_, &dead_values_, &runner_dead_values_}) f(pool.value_lists, *v);
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
    CellSlot* c = chunk(k);
    for (uint64_t i = 0; i < kChunk; ++i) {  // as new: no value, no error, no reference
      // Nobody touched it (host_cell and runner_store change the state before anything else):
      // still as new. A short step leaves most of its chunk so.
      if (c[i].state == CellSlot::Untouched) continue;
      c[i].cell.values.clear();
      c[i].cell.error = nullptr;
      c[i].refs.store(0, std::memory_order_relaxed);
      c[i].state = CellSlot::Untouched;
      c[i].dead_outs = 0;
      c[i].tracked = false;
      c[i].pinned.store(false, std::memory_order_relaxed);
    }
    std::lock_guard<std::mutex> g(pool.mu);
    if (pool.free.size() < ChunkPool::kMax) pool.free.push_back(c);
    else delete[] c;
  }
  for (CellSlot** page : pages_) delete[] page;
}

CellSlot& StepState::grow(uint64_t p) {
  std::lock_guard<SpinLock> g(lists_mu);
  for (uint64_t n = nchunks_.load(std::memory_order_relaxed); n <= p / kChunk; ++n) {
    CellSlot* c = nullptr;
    {
      ChunkPool& pool = chunk_pool();
      std::lock_guard<std::mutex> pg(pool.mu);
      if (!pool.free.empty()) {
        c = pool.free.back();
        pool.free.pop_back();
      }
    }
    if (!c) c = new CellSlot[kChunk];
    const int k = int(std::bit_width(n / kPage0 + 1)) - 1;
    const uint64_t off = n - kPage0 * ((uint64_t(1) << k) - 1);
    if (k >= kPages) throw std::length_error("[coexec] a step of more than 2^48 op calls");
    if (k == 0) {
      page0_[off] = c;
    } else {
      if (!pages_[k]) pages_[k] = new CellSlot*[kPage0 << k]();
      pages_[k][off] = c;
    }
    nchunks_.store(n + 1, std::memory_order_release);  // publishes the entry to lock-free readers
  }
  return chunk(p / kChunk)[p % kChunk];
}

CellSlot* StepState::host_cell(uint64_t p, bool* ready) {
  CellSlot& s = slot(p);
  std::lock_guard<SpinLock> g(s.mu);
  s.pos = p;
  s.refs.store(1, std::memory_order_relaxed);  // the caller's, until its placeholders hold theirs
  if (s.state == CellSlot::RunnerFirst) {
    // Written once by the runner, under this lock: from here on the host may read the values.
    if (ready) *ready = !s.cell.error && !s.cell.values.empty();
  } else if (failed_.load(std::memory_order_acquire) && p >= error_pos) {
    s.cell.error = error;  // runner_fail's walk may have passed this slot before it was the host's
  }
  s.state = CellSlot::Host;
  return &s;
}

bool StepState::ring_drop(const CellSlot& s, uint32_t out, RingDrop& d) const {
  if (!s.tracked || s.pinned.load(std::memory_order_acquire)) return false;
  // +1: a handle may die inside the call that reads it, before that call counts as validated.
  d = {s.pos, out, host_pos.load(std::memory_order_acquire) + 1};
  return true;
}

template <class Append>
bool StepState::hand_over_with(Append&& append) {
  std::lock_guard<SpinLock> g(lists_mu);
  if (host_frees_.load(std::memory_order_relaxed)) return false;
  append();
  ring_drops_n_.store(uint32_t(ring_drops_.size()), std::memory_order_relaxed);
  dead_n_.store(uint32_t(dead_.size() + dead_values_.size()), std::memory_order_relaxed);
  return true;
}

bool StepState::hand_over(std::span<const RingDrop> ring, std::span<CellSlot* const> dead, std::span<Tensor> values) {
  return hand_over_with([&] {
    ring_drops_.insert(ring_drops_.end(), ring.begin(), ring.end());
    dead_.insert(dead_.end(), dead.begin(), dead.end());
    for (Tensor& v : values) dead_values_.push_back(std::move(v));
  });
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
  if (hand_over_with([&] {
        append_batch(ring_drops_, host_ring_);
        append_batch(dead_, host_dead_);
        append_batch(dead_values_, host_dead_values_);
      }))
    return;
  free_dead(host_dead_);  // the runner is done with the step: freed here
  host_ring_.clear();
  host_dead_values_.clear();
}

void StepState::runner_take_ring_drops(std::vector<RingDrop>& into) {
  std::lock_guard<SpinLock> g(lists_mu);
  append_batch(into, ring_drops_);
  ring_drops_n_.store(0, std::memory_order_relaxed);
}

void StepState::host_drop(CellSlot& s) {
  bool has_values;
  {
    std::lock_guard<SpinLock> g(s.mu);
    s.state = CellSlot::Dead;  // the runner stores nothing here from now on
    has_values = !s.cell.values.empty();
  }
  RingDrop d;
  const bool ring = ring_drop(s, graph::Release::kAllOutputs, d);
  if (on_host_thread() && !host_frees_.load(std::memory_order_relaxed)) {
    if (ring) host_ring_.push_back(d);
    if (has_values) host_dead_.push_back(&s);
    if (host_batched() >= kHostBatch) flush_host_drops_slow();
    return;
  }
  CellSlot* dead = &s;
  if (!hand_over({&d, ring}, {&dead, has_values}, {}) && has_values)
    s.cell.values.clear();  // dead, and the runner is done with the step
}

void StepState::host_drop_output(CellSlot& s, uint32_t out) {
  if (out >= 32) return;  // kept with the position (ops with that many outputs are rare)
  Tensor v;  // once the runner is done with the step: freed here, outside the locks
  {
    std::lock_guard<SpinLock> g(s.mu);
    s.dead_outs |= uint32_t(1) << out;
    if (out < s.cell.values.size() && s.cell.values[out].defined()) {
      v = std::move(s.cell.values[out]);
      s.cell.values[out] = Tensor();
    }
  }
  RingDrop d;
  const bool ring = ring_drop(s, out, d);
  if (on_host_thread() && !host_frees_.load(std::memory_order_relaxed)) {
    if (ring) host_ring_.push_back(d);
    if (v.defined()) host_dead_values_.push_back(std::move(v));  // the runner frees it (as dead_)
    if (host_batched() >= kHostBatch) flush_host_drops_slow();
    return;
  }
  hand_over({&d, ring}, {}, {&v, v.defined()});  // (if it did not, v dies here)
}

void StepState::free_dead(std::vector<CellSlot*>& dead) {
  for (CellSlot* s : dead) s->cell.values.clear();  // dead: no other thread touches it again (capacity kept)
  dead.clear();
}

void StepState::host_reclaim() {
  flush_host_drops();
  std::vector<CellSlot*> dead;
  std::vector<Tensor> dead_values;
  {
    std::lock_guard<SpinLock> g(lists_mu);
    if (host_frees_) return;
    host_frees_.store(true, std::memory_order_relaxed);
    dead.swap(dead_);
    dead_values.swap(dead_values_);
    dead_n_.store(0, std::memory_order_relaxed);
  }
  free_dead(dead);
}

void StepState::runner_fail(uint64_t pos, std::exception_ptr err) {
  {
    std::lock_guard<std::mutex> g(mu);
    error = err;
    error_pos = pos;
  }
  failed_.store(true, std::memory_order_release);  // host_cell gives later slots the error itself
  const uint64_t end = nchunks_.load(std::memory_order_acquire) * kChunk;
  for (uint64_t p = pos; p < end; ++p) {
    CellSlot& s = slot(p);
    std::lock_guard<SpinLock> g(s.mu);
    if (s.state == CellSlot::Host || s.state == CellSlot::RunnerFirst) s.cell.error = err;
  }
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
  if (cell->error) throw PropagatedError{cell->error};
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
  CellSlot& s = slot(p);
  std::lock_guard<SpinLock> g(s.mu);
  return s.state != CellSlot::Dead;
}

void StepState::runner_store(uint64_t p, const std::vector<Tensor>& outs) {
  {
    CellSlot& s = slot(p);
    std::lock_guard<SpinLock> g(s.mu);
    if (s.state == CellSlot::Untouched) s.state = CellSlot::RunnerFirst;  // kept until the host validates p
    if (s.state != CellSlot::Dead) {
      s.cell.values.assign(outs.begin(), outs.end());
      for (uint32_t m = s.dead_outs; m; m &= m - 1)  // outputs whose placeholder already died
        if (size_t k = size_t(std::countr_zero(m)); k < s.cell.values.size()) s.cell.values[k] = Tensor();
    }
  }
  if (dead_n_.load(std::memory_order_relaxed) == 0) return;
  {
    std::lock_guard<SpinLock> g(lists_mu);
    runner_dead_.swap(dead_);
    runner_dead_values_.swap(dead_values_);
    dead_n_.store(0, std::memory_order_relaxed);
  }
  free_dead(runner_dead_);
  runner_dead_values_.clear();
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
