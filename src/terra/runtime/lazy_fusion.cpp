// Lazy mode's use of the elementwise-fusion pass: at a barrier, a run of consecutive fusible
// entries over one element count becomes one FusedKernel. The barrier knows exactly who can still
// read a value — a later entry of the batch, or a placeholder the program holds (the cell's other
// owners) — so everything else stays inside tiles and is never allocated.
#include "terra/compile/fused_elementwise.h"
#include "terra/runtime/lazy.h"

namespace terra::runtime {

void LazyExec::BatchUses::build(const std::vector<Entry>& work, const Block& block) {
  first.resize(work.size() + 1);
  uint32_t n = 0;
  for (size_t j = 0; j < work.size(); ++j) {
    first[j] = n;
    n += uint32_t(std::max<size_t>(work[j].meta.size(), 1));
  }
  first[work.size()] = n;
  last_use.assign(n, -1);
  reads.assign(n, 0);
  placeholder.assign(n, nullptr);
  seen.assign(work.size(), 0);
  for (size_t r = 0; r < work.size(); ++r)
    for (size_t i = 0; i < block.refs[r].size(); ++i) {
      const Ref& ref = block.refs[r][i];
      if (ref.entry < 0) continue;
      const uint32_t o = first[size_t(ref.entry)] + ref.out;
      last_use[o] = int32_t(r);
      reads[o]++;
      if (!placeholder[o]) {
        placeholder[o] = &work[r].inputs[i];
        seen[size_t(ref.entry)]++;
      }
    }
}

// Holders outside the batch: the program, autograd saving it for backward, a detached copy
// sharing its pending value. Later entries hold the placeholder as an input; those are not
// counted. An output no entry reads is found through the cell, which each live placeholder's
// pending value shares: more owners than the entry and the placeholders seen means one is held.
bool LazyExec::BatchUses::held_outside(const std::vector<Entry>& work, size_t j, uint32_t out) const {
  const uint32_t o = first[j] + out;
  const Tensor* ph = placeholder[o];
  if (!ph) return work[j].cell.use_count() > long(1 + seen[j]);
  if (ph->impl()->pending.use_count() > 1) return true;  // another tensor shares its value (detach)
  return ph->impl_ptr().use_count() > reads[o];
}

void LazyExec::release_after(std::vector<Entry>& work, const Block& block, size_t k, size_t m,
                             const BatchUses& uses) {
  auto drop = [&](size_t j, uint32_t out) {
    std::vector<Tensor>& v = work[j].cell->values;
    if (out < v.size() && v[out].defined() && !uses.held_outside(work, j, out)) v[out] = Tensor();
  };
  for (size_t r = k; r < m; ++r) {
    for (const Ref& ref : block.refs[r])
      if (ref.entry >= 0 && uses.last_use[uses.first[size_t(ref.entry)] + ref.out] == int32_t(r))
        drop(size_t(ref.entry), ref.out);
    for (uint32_t out = 0; out < uses.first[r + 1] - uses.first[r]; ++out)
      if (uses.last_use[uses.first[r] + out] < 0) drop(r, out);
  }
}

size_t LazyExec::run_fused_from(std::vector<Entry>& work, const Block& block, size_t k, const BatchUses& uses) {
  auto fusible = [&](const Entry& e) { return compile::fusible_elementwise(*e.op, e.out_dtype()); };
  if (k + 1 >= work.size() || !fusible(work[k]) || !fusible(work[k + 1])) return k;
  const int64_t n = numel_of(work[k].meta[0].shape);
  if (n <= 0) return k;
  // The entries that can join, with their outside inputs resolved (already computed: earlier
  // entries or host tensors; a value of an earlier batch still pending ends the run).
  std::vector<std::vector<Tensor>> ext;
  size_t m = k;
  for (; m < work.size(); ++m) {
    const Entry& e = work[m];
    if (!fusible(e) || numel_of(e.meta[0].shape) != n) break;
    bool ok = true;
    std::vector<Tensor>& x = ext.emplace_back();
    x.resize(e.inputs.size());
    for (size_t i = 0; ok && i < e.inputs.size(); ++i) {
      const Ref& r = block.refs[m][i];
      if (r.entry >= int32_t(k) && r.entry < int32_t(m)) continue;  // computed inside the run
      const Tensor& t = r.entry >= 0 ? work[size_t(r.entry)].cell->values.at(r.out) : e.inputs[i];
      const TensorImpl& ti = *t.impl();
      if (ti.pending && !ti.has_data()) ok = false;
      else if (!(ti.numel == 1 || (ti.numel == n && ti.is_contiguous()))) ok = false;
      else if (e.op->has(kInplace) && i == 0 && ti.numel != n) ok = false;
      x[i] = t;
    }
    if (!ok) {
      ext.pop_back();
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
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      const Ref& r = block.refs[j][i];
      const bool inside = r.entry >= int32_t(k) && r.entry < int32_t(j);
      fo.in.push_back(inside ? out_slot[size_t(r.entry) - k] : new_slot(ext[j - k][i].dtype(), ext[j - k][i]));
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
    if (!work[j].op->has(kInplace) && (uses.last_use[uses.first[j]] >= int32_t(m) || uses.held_outside(work, j, 0)))
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
