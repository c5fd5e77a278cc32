// What lazy mode's barrier knows about a batch: the block's liveness (who reads which value last,
// made once per block) and, with it, the elementwise-fusion pass: a run of consecutive fusible
// entries over one element count becomes one FusedKernel. The barrier knows exactly who can still
// read a value — a later entry of the batch, or a placeholder the program holds (the cell's other
// owners) — so everything else stays inside tiles and is never allocated.
#include "terra/compile/fused_elementwise.h"
#include "terra/runtime/lazy.h"

namespace terra::runtime {

bool LazyExec::Block::matches(const Batch& b) const {
  if (first.size() != b.entries.size() + 1 || refs != b.refs) return false;
  for (size_t j = 0; j < b.entries.size(); ++j)
    if (in_first[j] != b.entries[j].in_first || first[j + 1] - first[j] != std::max<size_t>(b.entries[j].meta.size(), 1))
      return false;
  return true;
}

void LazyExec::Block::build(const Batch& b) {
  refs = b.refs;
  const size_t n_entries = b.entries.size();
  fused_at.clear();  // planned again at this barrier
  fused_at.resize(n_entries);
  no_run.assign(n_entries, 0);
  first.resize(n_entries + 1);
  in_first.resize(n_entries);
  uint32_t n = 0;
  for (size_t j = 0; j < n_entries; ++j) {
    in_first[j] = b.entries[j].in_first;
    first[j] = n;
    n += uint32_t(std::max<size_t>(b.entries[j].meta.size(), 1));
  }
  first[n_entries] = n;
  last_use.assign(n, -1);
  reads.assign(n, 0);
  first_read.assign(n, -1);
  seen.assign(n_entries, 0);
  for (size_t r = 0; r < n_entries; ++r) {
    const Entry& e = b.entries[r];
    for (uint32_t s = e.in_first; s < e.in_first + e.n_in; ++s) {
      const Ref& ref = b.refs[s];
      if (ref.entry < 0) continue;
      const uint32_t o = first[size_t(ref.entry)] + ref.out;
      last_use[o] = int32_t(r);
      reads[o]++;
      if (first_read[o] < 0) {
        first_read[o] = int32_t(s);
        seen[size_t(ref.entry)]++;
      }
    }
  }
}

const Tensor& LazyExec::operand(const Batch& b, uint32_t slot) {
  const Ref& r = b.refs[slot];
  return r.entry >= 0 ? b.entries[size_t(r.entry)].cell->values.at(r.out) : b.inputs[slot];
}

bool LazyExec::fits_run(const TensorImpl& t, int64_t n) {
  if (t.awaiting.load(std::memory_order_acquire)) return false;
  return t.numel == 1 || (t.numel == n && t.is_contiguous());
}

// Later entries hold a placeholder as an input; those are not counted. An output no entry reads
// is found through the cell, which each live placeholder's pending value shares: more owners than
// the entry and the placeholders seen means one is held.
bool LazyExec::held_outside(const Batch& b, const Block& block, size_t j, uint32_t out) {
  const uint32_t o = block.first[j] + out;
  const int32_t s = block.first_read[o];
  if (s < 0) return b.entries[j].cell.use_count() > long(1 + block.seen[j]);
  const Tensor& ph = b.inputs[size_t(s)];
  if (ph.impl()->pending.use_count() > 1) return true;  // another tensor shares its value (detach)
  return ph.impl_ptr().use_count() > block.reads[o];
}

void LazyExec::release_after(Batch& b, const Block& block, size_t k, size_t m) {
  auto drop = [&](size_t j, uint32_t out) {
    TensorList& v = b.entries[j].cell->values;
    if (out < v.size() && v[out].defined() && !held_outside(b, block, j, out)) v[out] = Tensor();
  };
  for (size_t r = k; r < m; ++r) {
    const Entry& e = b.entries[r];
    for (uint32_t s = e.in_first; s < e.in_first + e.n_in; ++s) {
      const Ref& ref = b.refs[s];
      if (ref.entry >= 0 && block.last_use[block.first[size_t(ref.entry)] + ref.out] == int32_t(r))
        drop(size_t(ref.entry), ref.out);
    }
    for (uint32_t out = 0; out < block.first[r + 1] - block.first[r]; ++out)
      if (block.last_use[block.first[r] + out] < 0) drop(r, out);
  }
}

size_t LazyExec::run_fused_from(Batch& b, Block& block, size_t k) {
  std::vector<Entry>& work = b.entries;
  if (block.no_run[k]) return k;
  if (std::unique_ptr<FusedRun>& plan = block.fused_at[k]) {
    const size_t end = run_planned(b, block, k, *plan);
    if (end > k) return end;
    plan.reset();  // this call's operands do not fit it: plan again
  }
  auto fusible = [&](const Entry& e) { return compile::fusible_elementwise(*e.op, e.out_dtype()); };
  const int64_t n = k + 1 < work.size() && fusible(work[k]) && fusible(work[k + 1]) ? numel_of(work[k].meta[0].shape) : 0;
  if (n <= 0) {  // decided by the ops and shapes alone: the same on every hit
    block.no_run[k] = 1;
    return k;
  }
  // The entries that can join: their outside inputs (earlier entries or host tensors) fit a run
  // (a value of an earlier batch still pending ends it).
  size_t m = k;
  for (; m < work.size(); ++m) {
    const Entry& e = work[m];
    if (!fusible(e) || numel_of(e.meta[0].shape) != n) break;
    bool ok = true;
    for (uint32_t i = 0; ok && i < e.n_in; ++i) {
      const Ref& r = b.refs[e.in_first + i];
      if (r.entry >= int32_t(k) && r.entry < int32_t(m)) continue;  // computed inside the run
      const TensorImpl& t = *operand(b, e.in_first + i).impl();
      ok = fits_run(t, n) && !(e.op->has(kInplace) && i == 0 && t.numel != n);
    }
    if (!ok) break;
  }
  if (m - k < 2) return k;

  // The plan: slots numbered as FusedKernel wants them, each outside slot tied to the batch input
  // slot it reads, so a later barrier of this block resolves them without planning again.
  auto p = std::make_unique<FusedRun>();
  p->end = m;
  p->attrs.reserve(m - k);
  for (size_t j = k; j < m; ++j) p->attrs.push_back(work[j].attrs);
  p->kernel.numel = n;
  p->out_slot.resize(m - k);
  auto new_slot = [&](DType d, int32_t src) {
    p->kernel.slot_dtype.push_back(d);
    p->ext.push_back(src);
    return uint32_t(p->ext.size() - 1);
  };
  for (size_t j = k; j < m; ++j) {
    const Entry& e = work[j];
    compile::FusedOp fo{e.op, &p->attrs[j - k], {}, 0};
    for (uint32_t s = e.in_first; s < e.in_first + e.n_in; ++s) {
      const Ref& r = b.refs[s];
      const bool inside = r.entry >= int32_t(k) && r.entry < int32_t(j);
      fo.in.push_back(inside ? p->out_slot[size_t(r.entry) - k] : new_slot(operand(b, s).dtype(), int32_t(s)));
    }
    fo.out = e.op->has(kInplace) ? fo.in[0] : new_slot(e.meta[0].dtype, -1);
    p->out_slot[j - k] = fo.out;
    p->kernel.ops.push_back(std::move(fo));
  }
  block.fused_at[k] = std::move(p);
  const size_t end = run_planned(b, block, k, *block.fused_at[k]);
  if (end == k) block.fused_at[k].reset();
  return end;
}

// Everything that depends on this call rather than on the block is checked here, so a plan made
// at an earlier barrier runs only where it computes what the entries would one by one: the same
// ops and attributes, operands that are full-size and contiguous or scalars of the planned dtypes,
// already computed, and in-place targets that overlap no other operand.
size_t LazyExec::run_planned(Batch& b, const Block& block, size_t k, FusedRun& p) {
  std::vector<Entry>& work = b.entries;
  const size_t m = p.end;
  const int64_t n = p.kernel.numel;
  if (m > work.size()) return k;
  for (size_t j = k; j < m; ++j) {
    const Entry& e = work[j];
    const compile::FusedOp& o = p.kernel.ops[j - k];
    if (e.op != o.op || e.meta.empty() || numel_of(e.meta[0].shape) != n || e.attrs != p.attrs[j - k]) return k;
    if (!e.op->has(kInplace) && e.meta[0].dtype != p.kernel.slot_dtype[o.out]) return k;
  }
  TensorList slots(p.ext.size());
  for (size_t s = 0; s < p.ext.size(); ++s) {
    if (p.ext[s] < 0) continue;
    const Tensor& t = operand(b, uint32_t(p.ext[s]));
    if (!fits_run(*t.impl(), n) || t.impl()->dtype != p.kernel.slot_dtype[s]) return k;
    slots[s] = t;
  }
  // An in-place write must not overlap another operand at a different offset (a tile would read
  // elements the unfused op had already overwritten).
  for (const compile::FusedOp& o : p.kernel.ops) {
    if (!o.op->has(kInplace) || !slots[o.out].defined()) continue;
    const TensorImpl& a = *slots[o.out].impl();
    if (a.numel != n) return k;
    for (size_t s = 0; s < slots.size(); ++s) {
      if (s == o.out || !slots[s].defined()) continue;
      const TensorImpl& c = *slots[s].impl();
      if (a.storage == c.storage && (c.numel != n || a.offset != c.offset)) return k;
    }
  }
  // Outputs read after the run, or held outside the batch, are written out; the rest stay in tiles.
  try {
    for (size_t j = k; j < m; ++j) {
      if (work[j].op->has(kInplace)) continue;
      if (block.last_use[block.first[j]] >= int32_t(m) || held_outside(b, block, j, 0))
        slots[p.out_slot[j - k]] = empty(work[j].meta[0].shape, work[j].meta[0].dtype, work[j].op->name);
    }
  } catch (...) {
    return k;  // unfused, the entry that cannot allocate raises it at its own position
  }
  compile::run_fused(p.kernel, slots);
  for (size_t j = k; j < m; ++j) {
    const Tensor& v = slots[p.out_slot[j - k]];
    work[j].cell->values.clear();
    if (v.defined()) work[j].cell->values.push_back(v);
  }
  stats_.fused_kernels++;
  stats_.fused_ops += int64_t(m - k);
  return m;
}

}  // namespace terra::runtime
