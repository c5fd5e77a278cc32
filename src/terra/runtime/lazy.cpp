#include "terra/runtime/lazy.h"

#include "terra/runtime/placeholder.h"

#include "terra/compile/passes.h"

#include "terra/core/execute.h"
#include "terra/core/object_pool.h"
#include "terra/core/random.h"

#include <cstring>
#include <stdexcept>

namespace terra::runtime {
namespace {

struct LazyPending : PendingValue {
  LazyExec* exec;
  uint64_t batch;
  std::shared_ptr<ValueCell> cell;
  uint32_t out;
  int32_t entry;
  LazyPending(LazyExec* e, uint64_t b, std::shared_ptr<ValueCell> c, uint32_t o, int32_t i)
      : exec(e), batch(b), cell(std::move(c)), out(o), entry(i) {}
  void materialize(TensorImpl& t) override {
    // Cells of a batch that ran hold values or an error, so `exec` is only used while it owes
    // this value (an engine's destruction runs its last barrier first).
    if (cell->values.empty() && !cell->error && exec->batch() == batch) exec->barrier();
    if (cell->error) std::rethrow_exception(cell->error);
    if (out >= cell->values.size() || !cell->values[out].defined())
      throw std::runtime_error("[lazy] value of shape " + shape_str(t.shape) + " was never computed");
    const TensorImpl& v = *cell->values[out].impl();
    t.storage = v.storage;
    t.strides = v.strides;
    t.offset = v.offset;
    t.pending.reset();  // may destroy *this
  }
};

uint64_t mix(uint64_t h, uint64_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

}  // namespace

TensorList LazyExec::run(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                         TensorMetas& meta, PhiloxKey rng) {
  if (op.has(kStateful)) {
    barrier();
    return execute_eager(op, in, attrs, meta, rng);
  }
  if (runs_on_host(op, in, attrs)) {  // into NumPy's memory: at the call, after what precedes it
    if (op.has(kInplace)) barrier();
    return execute_eager(op, in, attrs, meta, rng);
  }
  Entry e{&op, attrs, std::vector<Tensor>(in.begin(), in.end()), {}, rng, make_pooled<ValueCell>(), meta};
  e.refs.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    auto* lp = dynamic_cast<LazyPending*>(in[i].impl()->pending.get());
    if (lp && lp->batch == batch_ && !in[i].impl()->has_data()) e.refs[i] = {lp->entry, lp->out};
    // NumPy may overwrite a shared array before the barrier: keep the value of this call.
    else if (needs_snapshot(*in[i].impl()))
      e.inputs[i] = Tensor(host_snapshot(*in[i].impl()));
  }
  int32_t idx = int32_t(pending_.size());
  TensorList out = placeholder_outputs(op, in, attrs, meta, [&](uint32_t k) {
    return make_pooled<LazyPending>(this, batch_, e.cell, k, idx);
  });
  pending_.push_back(std::move(e));
  return out;
}

void LazyExec::on_fetch(const Tensor&) { barrier(); }

// External data is hashed by shape and dtype only, except 0-d values 0 and 1, which are baked in
// as constants (LazyTensor §4); other scalars stay parameters of the compiled block.
uint64_t LazyExec::canonical_hash(const std::vector<Entry>& entries) {
  uint64_t h = entries.size();
  for (const Entry& e : entries) {
    h = mix(h, reinterpret_cast<uintptr_t>(e.op));
    h = mix(h, e.attrs.hash());
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      const Ref& r = e.refs[i];
      if (r.entry >= 0) {
        h = mix(mix(h, uint64_t(r.entry)), r.out);
        continue;
      }
      const TensorImpl& t = *e.inputs[i].impl();
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
  if (pending_.empty()) return;
  std::vector<Entry> work;
  work.swap(pending_);
  pending_.swap(spare_);  // empty; keeps the capacity the last batch grew
  uint64_t h = canonical_hash(work);
  batch_++;  // new calls from here on belong to the next pending graph
  auto it = cache_.find(h);
  if (it != cache_.end()) {
    stats_.lazy_cache_hits++;
  } else {
    stats_.lazy_cache_misses++;
    Block b;
    for (const Entry& e : work) b.refs.push_back(e.refs);
    it = cache_.emplace(h, std::move(b)).first;
  }
  const Block& block = it->second;
  const bool fuse = compile::pass_enabled(compile::Pass::FuseElementwise);
  BatchUses uses;
  uses.build(work, block);
  std::vector<Tensor> in;
  size_t k = 0;
  try {
    for (; k < work.size(); ++k) {
      if (fuse) {
        size_t end = run_fused_from(work, block, k, uses);
        if (end > k) {
          release_after(work, block, k, end, uses);
          k = end - 1;
          continue;
        }
      }
      Entry& e = work[k];
      in.resize(e.inputs.size());
      for (size_t i = 0; i < in.size(); ++i) {
        const Ref& r = block.refs[k][i];
        in[i] = r.entry >= 0 ? work[size_t(r.entry)].cell->values[r.out] : e.inputs[i];
        // An earlier batch's value: materialized here (its error raised here), never in a kernel.
        if (in[i].impl()->pending && !in[i].impl()->has_data()) in[i].impl()->data();
      }
      execute_eager_into(*e.op, in, e.attrs, e.meta, e.rng, /*bump_version=*/false, e.cell->values);
      in.clear();
      release_after(work, block, k, k + 1, uses);
    }
  } catch (...) {
    std::exception_ptr err = std::current_exception();
    // Eager stopped at entry k: the random numbers reserved for later entries were never drawn.
    for (size_t j = k + 1; j < work.size(); ++j)
      if (work[j].op->has(kRandom)) {
        set_generator_state({work[j].rng.seed, work[j].rng.offset});
        break;
      }
    for (; k < work.size(); ++k) work[k].cell->error = err;
    if (raise) throw;
  }
  work.clear();
  if (spare_.capacity() < work.capacity()) spare_.swap(work);
}

}  // namespace terra::runtime
