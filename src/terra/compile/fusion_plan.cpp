#include "terra/compile/fusion_plan.h"

namespace terra::compile {

using graph::Input;

namespace {

void collect(const graph::Region& r, Readers& rd) {
  for (const graph::Switch& sw : r.switches)
    for (const graph::Case& c : sw.cases)
      for (const graph::Item& it : c.block) {
        if (it.is_loop) {
          collect(*it.body, rd);
          continue;
        }
        for (const Input& x : it.op.inputs) {
          if (x.kind == Input::Value) rd.of.at(x.src.node).push_back({it.op.node, x.src.out, x.src.age, false});
          if (x.kind == Input::Phi)
            for (const trace::Source& s : x.candidates)
              if (s.kind == trace::Source::Op) rd.of.at(s.node).push_back({it.op.node, s.out, s.age, true});
        }
      }
}

// Position in the segment [seg_begin, upto) of the item computing node `n` (-1: none).
int index_in(const std::vector<graph::Item>& block, uint32_t seg_begin, uint32_t upto, uint32_t n) {
  for (uint32_t k = seg_begin; k < upto; ++k)
    if (block[k].op.node == n) return int(k - seg_begin);
  return -1;
}

// Input `i` of item `k` is computed inside a segment that starts at `seg_begin` (and reaches k).
bool is_internal(const std::vector<graph::Item>& block, uint32_t seg_begin, uint32_t k, size_t i) {
  const Input& x = block[k].op.inputs[i];
  return x.kind == Input::Value && x.src.age == 0 && x.src.node != block[k].op.node &&
         index_in(block, seg_begin, k, x.src.node) >= 0;
}

// Whether item `k` (recorded as `r`) can join a segment over `n` elements starting at `seg_begin`.
bool accepts(const std::vector<graph::Item>& block, uint32_t seg_begin, uint32_t k, const OpRecord& r, int64_t n) {
  const graph::OpNode& op = block[k].op;
  if (n <= 0 || !fusible_elementwise(*op.op, r.out.dtype) || numel_of(r.out.shape) != n || !r.out_contig) return false;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (is_internal(block, seg_begin, k, i)) continue;
    // An earlier execution of a node in the segment, or a phi that may name one: the runner reads
    // those from rings while the segment's current values are not pushed yet (off by one).
    const Input& x = op.inputs[i];
    if (x.kind == Input::Value && x.src.node != op.node && index_in(block, seg_begin, k, x.src.node) >= 0) return false;
    if (x.kind == Input::Phi)
      for (const trace::Source& s : x.candidates)
        if (s.kind == trace::Source::Op && index_in(block, seg_begin, k + 1, s.node) >= 0) return false;
    const int64_t m = numel_of(r.in[i].shape);
    if (!(m == 1 || (m == n && r.in_contig[i]))) return false;
  }
  return true;
}

void finalize(const std::vector<graph::Item>& block, const FusionSpan& sp, const Readers& rd, FusedSegment& seg) {
  const uint32_t n_ops = seg.end - seg.begin;
  FusedKernel& k = seg.kernel;
  k.numel = numel_of(sp.rec[seg.begin - sp.begin].out.shape);
  seg.internal.assign(n_ops, {});
  seg.out_slot.assign(n_ops, 0);
  seg.out_meta.assign(n_ops, {});
  seg.read_outside.assign(n_ops, 0);
  seg.writes_ext.assign(n_ops, 0);
  for (uint32_t j = 0; j < n_ops; ++j) {
    const graph::OpNode& op = block[seg.begin + j].op;
    const OpRecord& r = sp.rec[seg.begin + j - sp.begin];
    FusedOp fo{op.op, &op.attrs, {}, 0};
    seg.internal[j].assign(op.inputs.size(), 0);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (is_internal(block, seg.begin, seg.begin + j, i)) {
        seg.internal[j][i] = 1;
        fo.in.push_back(seg.out_slot[size_t(index_in(block, seg.begin, seg.begin + j, op.inputs[i].src.node))]);
        continue;
      }
      const uint32_t slot = uint32_t(k.slot_dtype.size());
      k.slot_dtype.push_back(r.in[i].dtype);
      seg.ext.push_back({j, uint32_t(i), slot, r.in[i].shape, r.in[i].dtype, numel_of(r.in[i].shape) == 1 && k.numel != 1});
      fo.in.push_back(slot);
    }
    if (op.op->has(kInplace)) {
      fo.out = fo.in[0];
      seg.writes_ext[j] = !seg.internal[j][0];
    } else {
      fo.out = uint32_t(k.slot_dtype.size());
      k.slot_dtype.push_back(r.out.dtype);
    }
    seg.out_slot[j] = fo.out;
    seg.out_meta[j] = r.out;
    k.ops.push_back(std::move(fo));
    bool outside = op.fetched;
    for (const Readers::Read& rr : rd.of.at(op.node)) {
      int m = index_in(block, seg.begin, seg.end, rr.reader);
      const bool inside = !rr.phi && rr.age == 0 && rr.reader != op.node && m > int(j);
      outside |= !inside;
    }
    seg.read_outside[j] = outside;
  }
  seg.rebindable = true;
  const Shape& s = seg.out_meta[0].shape;
  for (const TensorMeta& m : seg.out_meta) seg.rebindable &= m.shape == s;
  for (const FusedSegment::Ext& e : seg.ext) seg.rebindable &= e.scalar || e.shape == s;
}

}  // namespace

bool FusedSegment::rebind(const std::vector<const TensorImpl*>& t) {
  if (!rebindable || t.size() != ext.size()) return false;
  const Shape* s = nullptr;
  for (size_t i = 0; i < ext.size(); ++i) {
    if (t[i]->dtype != ext[i].dtype) return false;
    if (ext[i].scalar) {
      if (t[i]->numel != 1) return false;
      continue;
    }
    if (!t[i]->is_contiguous() || (s && t[i]->shape != *s)) return false;
    s = &t[i]->shape;
  }
  if (!s || numel_of(*s) <= 1) return false;  // one element: scalars and full operands would look alike
  for (Ext& e : ext)
    if (!e.scalar) e.shape = *s;
  for (TensorMeta& m : out_meta) m.shape = *s;
  kernel.numel = numel_of(*s);
  return true;
}

void Readers::build(const graph::SymbolicGraph& g) {
  of.assign(g.max_age.size(), {});
  collect(g.root, *this);
}

BlockPlan plan_block(const std::vector<graph::Item>& block) {
  BlockPlan p;
  uint32_t k = 0;
  const uint32_t n = uint32_t(block.size());
  auto ok = [&](uint32_t i) {
    // A node with symbolic attributes takes them from its message: it runs on its own.
    return !block[i].is_loop && block[i].op.num_outputs == 1 && !block[i].op.symbolic_attrs &&
           fusible_elementwise(*block[i].op.op);
  };
  while (k < n) {
    if (!ok(k)) {
      ++k;
      continue;
    }
    uint32_t e = k;
    while (e < n && ok(e)) ++e;
    if (e - k >= 2) p.spans.push_back(FusionSpan{k, e, false, {}, {}, {}});
    k = e;
  }
  p.variants.resize(p.spans.size());
  return p;
}

void plan_segments(const std::vector<graph::Item>& block, FusionSpan& sp, const Readers& rd) {
  sp.segs.clear();
  uint32_t j = sp.begin;
  while (j < sp.end) {
    const int64_t n = numel_of(sp.rec[j - sp.begin].out.shape);
    uint32_t k = j;
    while (k < sp.end && accepts(block, j, k, sp.rec[k - sp.begin], n)) ++k;
    FusedSegment seg;
    seg.begin = j;
    if (k - j >= 2) {
      seg.end = k;
      seg.fused = true;
      finalize(block, sp, rd, seg);
    } else {
      seg.end = k = j + 1;
    }
    sp.segs.push_back(std::move(seg));
    j = k;
  }
  sp.planned = true;
}

}  // namespace terra::compile
