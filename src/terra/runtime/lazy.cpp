#include "terra/runtime/lazy.h"

#include "terra/runtime/placeholder.h"

#include "terra/compile/passes.h"

#include "terra/core/execute.h"
#include "terra/core/object_pool.h"
#include "terra/core/random.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <typeinfo>
#include <unordered_set>
#include <utility>

namespace terra::runtime {
namespace {

struct LazyPending final : PendingValue {
  LazyExec* exec;
  uint64_t batch;
  std::shared_ptr<LazyCell> cell;
  uint32_t out;
  int32_t entry;
  LazyPending(LazyExec* e, uint64_t b, std::shared_ptr<LazyCell> c, uint32_t o, int32_t i)
      : exec(e), batch(b), cell(std::move(c)), out(o), entry(i) {}
  void wait(const TensorImpl&) override {
    // A cell that is not ready is owed by a live engine (its destruction runs its last barrier).
    if (!cell->ready.load(std::memory_order_acquire)) LazyExec::compute(exec, batch, *cell);
  }
  void materialize(TensorImpl& t) override {  // after wait(): the cell is ready
    if (cell->error) std::rethrow_exception(cell->error);
    if (out >= cell->values.size() || !cell->values[out].defined())
      throw std::runtime_error("[lazy] value of shape " + shape_str(t.shape) + " was never computed");
    t.adopt(*cell->values[out].impl());
    t.installed();  // may destroy *this
  }
};

// The live engines, so that a thread reading a value owed by an engine being destroyed on another
// thread never touches it after its end (LazyExec::compute pins it).
// Never destroyed: an engine kept in a static may end after this file's statics.
struct Live {
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_set<const LazyExec*> engines;
};
Live& live() {
  static Live* l = new Live;
  return *l;
}

uint64_t mix(uint64_t h, uint64_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

}  // namespace

LazyExec::LazyExec(Stats& stats) : stats_(stats) {
  std::lock_guard<std::mutex> g(live().mu);
  live().engines.insert(this);
}

LazyExec::~LazyExec() {
  barrier(/*raise=*/false);
  std::unique_lock<std::mutex> g(live().mu);
  live().engines.erase(this);
  live().cv.wait(g, [&] { return pins_ == 0; });  // a reader inside compute finds its cell ready
}

void LazyExec::compute(LazyExec* exec, uint64_t batch, const LazyCell& cell) {
  {
    // A destroyed engine made every cell ready before leaving the set: checked under the lock,
    // not ready means `exec` is the live engine that owes it.
    std::lock_guard<std::mutex> g(live().mu);
    if (cell.ready.load(std::memory_order_acquire) || !live().engines.count(exec)) return;
    exec->pins_++;
  }
  struct Unpin {
    LazyExec* e;
    ~Unpin() {
      std::lock_guard<std::mutex> g(live().mu);
      if (--e->pins_ == 0) live().cv.notify_all();
    }
  } unpin{exec};
  std::lock_guard<SpinLock> g(exec->mu_);
  if (cell.ready.load(std::memory_order_acquire) || exec->batch_ != batch) return;
  if (std::this_thread::get_id() == exec->owner_) {
    exec->barrier_locked(/*raise=*/true);  // as a fetch: the batch's error is raised at the read
    return;
  }
  // Another thread: the error (if any) reaches that thread through the cells it reads, and the
  // engine's program at its next barrier, as eager's would at the failing call.
  exec->barrier_locked(/*raise=*/false);
}

// Whether `t` is a value some other engine (lazy or co-executed) still owes.
bool LazyExec::owed_elsewhere(const TensorImpl& t) const {
  auto g = lock_if_awaiting(t);
  if (!g.owns_lock() || !t.pending) return false;
  const PendingValue& pv = *t.pending;
  return typeid(pv) != typeid(LazyPending) || static_cast<const LazyPending&>(pv).exec != this;
}

TensorList LazyExec::run(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                         const TensorMetas& meta, PhiloxKey rng) {
  // Another engine's values are read here, as eager reads them, before this engine's lock: a
  // barrier holding it must never wait for another engine's lock. Two engines on two threads whose
  // batches read each other's values would otherwise each hold their own and wait for the other's.
  for (const Tensor& x : in)
    if (owed_elsewhere(*x.impl())) x.impl()->data();
  std::lock_guard<SpinLock> g(mu_);
  if (op.has(kStateful)) {
    barrier_locked(true);
    return execute_eager(op, in, attrs, meta, rng);
  }
  if (runs_on_host(op, in, attrs)) {  // into NumPy's memory: at the call, after what precedes it
    if (op.has(kInplace)) barrier_locked(true);
    return execute_eager(op, in, attrs, meta, rng);
  }
  Batch& b = pending_;
  const uint32_t first = uint32_t(b.inputs.size());
  const int32_t idx = int32_t(b.entries.size());
  // The entry keeps its own copy of the metas: the barrier allocates the outputs from them.
  Entry e{&op, attrs, first, uint32_t(in.size()), rng, make_pooled<LazyCell>(), meta};
  TensorList out;
  try {
    b.inputs.insert(b.inputs.end(), in.begin(), in.end());
    b.refs.resize(first + in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      TensorImpl* t = in[i].impl();
      // This batch's placeholders are not read anywhere before its barrier; an older one may be
      // installed by another thread's first read meanwhile (the lock keeps `pending` alive here).
      if (auto g = lock_if_awaiting(*t); g.owns_lock()) {
        // An exact type check: a dynamic_cast per input costs more than the rest of this loop.
        PendingValue* pv = t->pending.get();
        auto* lp = pv && typeid(*pv) == typeid(LazyPending) ? static_cast<LazyPending*>(pv) : nullptr;
        // Another engine's batch may carry the same number: only this engine's entries are wired.
        if (lp && lp->exec == this && lp->batch == batch_) {
          b.refs[first + i] = {lp->entry, lp->out};
          continue;
        }
      }
      // NumPy may overwrite a shared array before the barrier: keep the value of this call.
      if (needs_snapshot(*t))
        b.inputs[first + i] = Tensor(host_snapshot(*t));
    }
    // Storage and pending value apart (not set_pending's one block): the fusion planner reads
    // the pending value's reference count as the number of tensors sharing the value.
    out = placeholder_outputs(op, in, attrs, meta, [&](TensorImpl& t, uint32_t k, bool storage_too) {
      if (storage_too) t.storage = make_pooled<Storage>();  // no data: carries the version counter
      t.set_pending(make_pooled<LazyPending>(this, batch_, e.cell, k, idx));
    });
    b.entries.push_back(std::move(e));
  } catch (...) {  // nothing of this call stays recorded
    b.inputs.resize(first);
    b.refs.resize(first);
    throw;
  }
  return out;
}

void LazyExec::on_fetch(const Tensor&) { barrier(); }

// External data is hashed by shape and dtype only, except 0-d values 0 and 1, which are baked in
// as constants (LazyTensor §4); other scalars stay parameters of the compiled block.
uint64_t LazyExec::canonical_hash(const Batch& b) {
  uint64_t h = b.entries.size();
  for (const Entry& e : b.entries) {
    h = mix(h, reinterpret_cast<uintptr_t>(e.op));
    h = mix(h, e.attrs.hash());
    for (uint32_t s = e.in_first; s < e.in_first + e.n_in; ++s) {
      const Ref& r = b.refs[s];
      if (r.entry >= 0) {
        h = mix(mix(h, uint64_t(r.entry)), r.out);
        continue;
      }
      const TensorImpl& t = *b.inputs[s].impl();
      h = mix(h, 0xe7);
      h = mix(h, uint64_t(t.dtype));
      for (int64_t d : t.shape) h = mix(h, uint64_t(d));
      if (t.numel == 1 && t.shape.empty() && t.has_data() && is_floating(t.dtype)) {
        double v = t.dtype == DType::Float32 ? double(*static_cast<const float*>(const_cast<TensorImpl&>(t).data()))
                                             : *static_cast<const double*>(const_cast<TensorImpl&>(t).data());
        if (v == 0.0 || v == 1.0) h = mix(h, v == 0.0 ? 0xc0 : 0xc1);
      }
    }
  }
  return h;
}

void LazyExec::barrier(bool raise) {
  std::lock_guard<SpinLock> g(mu_);
  barrier_locked(raise);
}

void LazyExec::barrier_locked(bool raise) {
  if (raise && owed_error_) std::rethrow_exception(std::exchange(owed_error_, nullptr));
  if (pending_.entries.empty()) return;
  Batch work;
  std::swap(work, pending_);
  std::swap(pending_, spare_);  // empty; keeps the capacity the last batch grew
  batch_++;  // new calls from here on belong to the next pending graph
  const uint64_t h = canonical_hash(work);
  auto it = cache_.find(h);
  if (it != cache_.end() && it->second.matches(work)) {
    stats_.lazy_cache_hits++;
  } else {
    stats_.lazy_cache_misses++;
    if (it == cache_.end()) it = cache_.emplace(h, Block{}).first;
    it->second.build(work);
  }
  Block& block = it->second;
  const bool fuse = compile::pass_enabled(compile::Pass::FuseElementwise);
  TensorList in;
  size_t k = 0;
  try {
    for (; k < work.entries.size(); ++k) {
      if (fuse) {
        size_t end = run_fused_from(work, block, k);
        if (end > k) {
          release_after(work, block, k, end);
          k = end - 1;
          continue;
        }
      }
      Entry& e = work.entries[k];
      in.resize(e.n_in);
      for (uint32_t i = 0; i < e.n_in; ++i) {
        in[i] = operand(work, e.in_first + i);
        // An earlier batch's value: materialized here (its error raised here), never in a kernel.
        if (in[i].impl()->awaiting.load(std::memory_order_acquire)) in[i].impl()->data();
      }
      execute_eager_into(*e.op, in, e.attrs, e.meta, e.rng, /*bump_version=*/false, e.cell->values);
      in.clear();
      release_after(work, block, k, k + 1);
    }
  } catch (...) {
    std::exception_ptr err = std::current_exception();
    in.clear();
    // Eager stopped at entry k: the random numbers reserved for later entries were never drawn.
    // Not from another thread's read: the engine's program may be reserving numbers meanwhile,
    // and learns of the error only at its next barrier.
    const bool own = std::this_thread::get_id() == owner_;
    for (size_t j = k + 1; own && j < work.entries.size(); ++j)
      if (work.entries[j].op->has(kRandom)) {
        set_generator_state({work.entries[j].rng.seed, work.entries[j].rng.offset});
        break;
      }
    for (; k < work.entries.size(); ++k) work.entries[k].cell->error = err;
    for (const Entry& e : work.entries) e.cell->ready.store(true, std::memory_order_release);
    work.clear();
    std::swap(spare_, work);
    if (raise) throw;
    if (!own) owed_error_ = err;
    return;
  }
  for (const Entry& e : work.entries) e.cell->ready.store(true, std::memory_order_release);
  work.clear();
  std::swap(spare_, work);
}

}  // namespace terra::runtime
