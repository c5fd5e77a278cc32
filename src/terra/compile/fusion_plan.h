// The elementwise-fusion pass over the symbolic graph's basic blocks. Statically, a block's
// runs of consecutive fusible ops become spans; once the runner has executed a span op by op and
// recorded its shapes, the span is cut into segments of ops over one element count whose every
// operand is full-size and contiguous or a scalar — each such segment of two or more ops runs as
// one FusedKernel. Ops keep their order (the host protocol is per position), values read outside
// a segment (later ops, later iterations, fetches) are written out, the rest stay in tiles.
#pragma once
#include <cstdint>
#include <vector>

#include "terra/compile/fused_elementwise.h"
#include "terra/graph/symbolic_graph.h"

namespace terra::compile {

// What the runner saw when it ran one op of a span unfused.
struct OpRecord {
  TensorMetas in;
  std::vector<uint8_t> in_contig;
  TensorMeta out;
  bool out_contig = false;
};

// Who reads each node's outputs, over the whole graph (inputs and phi candidates).
struct Readers {
  struct Read {
    uint32_t reader, out, age;
    bool phi;  // through a phi candidate (resolved per step, so always read from the ring)
  };
  std::vector<std::vector<Read>> of;  // per producer node id
  void build(const graph::SymbolicGraph& g);
};

struct FusedSegment {
  uint32_t begin = 0, end = 0;  // item indices in the block
  bool fused = false;           // false: its one op runs alone
  FusedKernel kernel;
  std::vector<std::vector<uint8_t>> internal;  // per op, per input: 1 = computed inside the segment
  struct Ext {                                 // an input from outside, as recorded
    uint32_t op, input, slot;
    Shape shape;
    DType dtype;
    bool scalar;
  };
  std::vector<Ext> ext;
  std::vector<uint32_t> out_slot;     // per op
  TensorMetas out_meta;               // per op
  std::vector<uint8_t> read_outside;  // per op: its output is read after the segment (or fetched)
  std::vector<uint8_t> writes_ext;    // per op: writes an outside tensor in place
  // Every full-size operand and output has one shape: the same segment runs on another shape
  // (a loop over parameters of several shapes) after rebind().
  bool rebindable = false;
  // Adopts the shapes of `ext_tensors` (per Ext, in order) if they keep the segment's structure:
  // same dtypes, scalars still scalars, every full-size operand contiguous with one common shape.
  bool rebind(const std::vector<const TensorImpl*>& ext_tensors);
};

struct FusionSpan {
  uint32_t begin = 0, end = 0;  // item indices: consecutive ops of fusible kinds
  bool planned = false;         // segments valid; false: the next run executes op by op and records
  TensorMetas key;              // the first op's input shapes this plan was recorded for
  std::vector<OpRecord> rec;
  std::vector<FusedSegment> segs;
};

struct BlockPlan {
  std::vector<FusionSpan> spans;  // ordered by begin
  // Per span: plans recorded for different first-op input shapes (a loop body over parameters
  // of several shapes runs the same block with each). At most kMaxVariants; more run unfused.
  std::vector<std::vector<FusionSpan>> variants;
  static constexpr size_t kMaxVariants = 8;
};

// The static part: spans of two or more consecutive fusible ops.
BlockPlan plan_block(const std::vector<graph::Item>& block);
// Cuts a recorded span into segments (fills sp.segs, sets sp.planned).
void plan_segments(const std::vector<graph::Item>& block, FusionSpan& sp, const Readers& readers);

}  // namespace terra::compile
