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
    if (first[j + 1] - first[j] != std::max<size_t>(b.entries[j].meta.size(), 1)) return false;
  return true;
}

void LazyExec::Block::build(const Batch& b) {
  refs = b.refs;
  const size_t n_entries = b.entries.size();
  first.resize(n_entries + 1);
  uint32_t n = 0;
  for (size_t j = 0; j < n_entries; ++j) {
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

size_t LazyExec::run_fused_from(Batch& b, const Block& block, size_t k) {
  std::vector<Entry>& work = b.entries;
  auto fusible = [&](const Entry& e) { return compile::fusible_elementwise(*e.op, e.out_dtype()); };
  if (k + 1 >= work.size() || !fusible(work[k]) || !fusible(work[k + 1])) return k;
  const int64_t n = numel_of(work[k].meta[0].shape);
  if (n <= 0) return k;
  // The entries that can join, with their outside inputs resolved (already computed: earlier
  // entries or host tensors; a value of an earlier batch still pending ends the run). The run's
  // input slots are consecutive: ext[s - base] is slot s's outside value (undefined: computed
  // inside the run).
  const uint32_t base = work[k].in_first;
  std::vector<Tensor> ext;
  size_t m = k;
  for (; m < work.size(); ++m) {
    const Entry& e = work[m];
    if (!fusible(e) || numel_of(e.meta[0].shape) != n) break;
    bool ok = true;
    const size_t mark = ext.size();
    ext.resize(e.in_first + e.n_in - base);
    for (uint32_t i = 0; ok && i < e.n_in; ++i) {
      const uint32_t s = e.in_first + i;
      const Ref& r = b.refs[s];
      if (r.entry >= int32_t(k) && r.entry < int32_t(m)) continue;  // computed inside the run
      const Tensor& t = r.entry >= 0 ? work[size_t(r.entry)].cell->values.at(r.out) : b.inputs[s];
      const TensorImpl& ti = *t.impl();
      if (ti.pending && !ti.has_data()) ok = false;
      else if (!(ti.numel == 1 || (ti.numel == n && ti.is_contiguous()))) ok = false;
      else if (e.op->has(kInplace) && i == 0 && ti.numel != n) ok = false;
      ext[s - base] = t;
    }
    if (!ok) {
      ext.resize(mark);
      break;
    }
  }
  if (m - k < 2) return k;

  compile::FusedKernel kern;
  kern.numel = n;
  std::vector<Tensor> slots;
  std::vector<uint32_t> out_slot(m - k);
  std::vector<uint8_t> keep;
  auto new_slot = [&](DType d, Tensor t) {
    kern.slot_dtype.push_back(d);
    slots.push_back(std::move(t));
    keep.push_back(0);
    return uint32_t(slots.size() - 1);
  };
  std::vector<uint32_t> targets;  // outside tensors written in place
  for (size_t j = k; j < m; ++j) {
    const Entry& e = work[j];
    compile::FusedOp fo{e.op, &e.attrs, {}, 0};
    for (uint32_t s = e.in_first; s < e.in_first + e.n_in; ++s) {
      const Ref& r = b.refs[s];
      const bool inside = r.entry >= int32_t(k) && r.entry < int32_t(j);
      fo.in.push_back(inside ? out_slot[size_t(r.entry) - k] : new_slot(ext[s - base].dtype(), ext[s - base]));
    }
    if (e.op->has(kInplace)) {
      fo.out = fo.in[0];
      if (slots[fo.out].defined()) targets.push_back(fo.out);
    } else {
      fo.out = new_slot(e.meta[0].dtype, Tensor());
    }
    out_slot[j - k] = fo.out;
    kern.ops.push_back(std::move(fo));
  }
  // An in-place write must not overlap another operand at a different offset (a tile would read
  // elements the unfused op had already overwritten).
  for (uint32_t t : targets)
    for (size_t s = 0; s < slots.size(); ++s) {
      if (s == t || !slots[s].defined()) continue;
      const TensorImpl& a = *slots[t].impl();
      const TensorImpl& b = *slots[s].impl();
      if (a.storage == b.storage && (b.numel != n || a.offset != b.offset)) return k;
    }
  for (size_t j = k; j < m; ++j)
    if (!work[j].op->has(kInplace) && (block.last_use[block.first[j]] >= int32_t(m) || held_outside(b, block, j, 0)))
      keep[out_slot[j - k]] = 1;
  try {
    for (size_t j = k; j < m; ++j) {
      const uint32_t s = out_slot[j - k];
      if (keep[s] && !slots[s].defined()) slots[s] = empty(work[j].meta[0].shape, work[j].meta[0].dtype, work[j].op->name);
    }
  } catch (...) {
    return k;  // unfused, the entry that cannot allocate raises it at its own position
  }
  compile::run_fused(kern, slots);
  for (size_t j = k; j < m; ++j) {
    const Tensor& v = slots[out_slot[j - k]];
    work[j].cell->values.clear();
    if (v.defined()) work[j].cell->values.push_back(v);
  }
  stats_.fused_kernels++;
  stats_.fused_ops += int64_t(m - k);
  return m;
}

}  // namespace terra::runtime
