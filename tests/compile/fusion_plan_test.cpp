// The fusion pass on hand-built blocks: which runs of ops become spans, where recorded shapes cut
// them into segments, which inputs are computed inside, and which outputs must be written out.
#include <gtest/gtest.h>

#include <terra/terra.h>

#include "terra/compile/fusion_plan.h"

namespace terra::compile {
namespace {

using graph::Input;

struct BlockBuilder {
  graph::SymbolicGraph g;
  std::vector<graph::Item>& block() { return g.root.switches.at(0).cases.at(0).block; }
  BlockBuilder() {
    g.root.switches.emplace_back();
    g.root.switches[0].cases.emplace_back();
  }
  static Input value(uint32_t node, uint32_t age = 0) {
    Input x{Input::Value, {}, nullptr, {}};
    x.src.kind = trace::Source::Op;
    x.src.node = node;
    x.src.age = age;
    return x;
  }
  static Input feed() { return Input{Input::Feed, {}, nullptr, {}}; }
  void op(uint32_t node, const char* name, std::vector<Input> in) {
    graph::Item it;
    it.op.node = node;
    it.op.op = find_op(name);
    it.op.inputs = std::move(in);
    it.op.num_outputs = 1;
    block().push_back(std::move(it));
    g.max_age.resize(std::max<size_t>(g.max_age.size(), node + 1), 0);
  }
};

OpRecord rec(size_t inputs, int64_t n) {
  OpRecord r;
  r.in.assign(inputs, TensorMeta{{n}, DType::Float32});
  r.in_contig.assign(inputs, 1);
  r.out = {{n}, DType::Float32};
  r.out_contig = true;
  return r;
}

// n0 = x * s; n1 = n0 + s; n2 = matmul(a, b); n3 = tanh(n2); n4 = n3 * n1; n5 = sum(n4)
BlockBuilder example(uint32_t age_of_n3_in_n4 = 0) {
  BlockBuilder b;
  b.op(0, "mul", {BlockBuilder::feed(), BlockBuilder::feed()});
  b.op(1, "add", {BlockBuilder::value(0), BlockBuilder::feed()});
  b.op(2, "matmul", {BlockBuilder::feed(), BlockBuilder::feed()});
  b.op(3, "tanh", {BlockBuilder::value(2)});
  b.op(4, "mul", {BlockBuilder::value(3, age_of_n3_in_n4), BlockBuilder::value(1)});
  b.op(5, "sum", {BlockBuilder::value(4)});
  return b;
}

TEST(FusionPlan, SpansAreRunsOfFusibleOps) {
  BlockBuilder b = example();
  BlockPlan p = plan_block(b.block());
  ASSERT_EQ(p.spans.size(), 2u);
  EXPECT_EQ(p.spans[0].begin, 0u);
  EXPECT_EQ(p.spans[0].end, 2u);
  EXPECT_EQ(p.spans[1].begin, 3u);
  EXPECT_EQ(p.spans[1].end, 5u);
}

TEST(FusionPlan, SegmentsKeepInsideValuesInTilesAndWriteOutTheRest) {
  BlockBuilder b = example();
  Readers rd;
  rd.build(b.g);
  BlockPlan p = plan_block(b.block());
  for (FusionSpan& sp : p.spans) {
    sp.rec = {rec(2, 100), rec(2, 100)};
    if (sp.begin == 3) sp.rec[0] = rec(1, 100);
    plan_segments(b.block(), sp, rd);
    ASSERT_EQ(sp.segs.size(), 1u);
    ASSERT_TRUE(sp.segs[0].fused);
  }
  const FusedSegment& first = p.spans[0].segs[0];  // n0, n1
  EXPECT_EQ(first.internal[1], (std::vector<uint8_t>{1, 0}));  // n1 reads n0 inside, s from outside
  EXPECT_EQ(first.read_outside, (std::vector<uint8_t>{0, 1}));  // n1 is read by n4, another segment
  EXPECT_EQ(first.ext.size(), 3u);
  EXPECT_EQ(first.kernel.ops.size(), 2u);
  const FusedSegment& second = p.spans[1].segs[0];  // n3, n4
  EXPECT_EQ(second.internal[1], (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(second.read_outside, (std::vector<uint8_t>{0, 1}));  // n4 is read by sum
}

TEST(FusionPlan, ADifferentElementCountCutsTheSegment) {
  BlockBuilder b = example();
  Readers rd;
  rd.build(b.g);
  BlockPlan p = plan_block(b.block());
  FusionSpan& sp = p.spans[0];
  sp.rec = {rec(2, 100), rec(2, 100)};
  sp.rec[1].out.shape = {10, 10, 2};  // 200 elements
  sp.rec[1].in[1].shape = {10, 10, 2};
  plan_segments(b.block(), sp, rd);
  ASSERT_EQ(sp.segs.size(), 2u);
  EXPECT_FALSE(sp.segs[0].fused);
  EXPECT_FALSE(sp.segs[1].fused);
}

TEST(FusionPlan, AnEarlierExecutionOfASegmentNodeIsNotReadInside) {
  BlockBuilder b = example(/*age_of_n3_in_n4=*/1);
  b.g.max_age[3] = 1;
  Readers rd;
  rd.build(b.g);
  BlockPlan p = plan_block(b.block());
  FusionSpan& sp = p.spans[1];
  sp.rec = {rec(1, 100), rec(2, 100)};
  plan_segments(b.block(), sp, rd);
  ASSERT_EQ(sp.segs.size(), 2u);  // n4 reads the previous n3: the runner's ring, not a tile
  EXPECT_FALSE(sp.segs[0].fused);
}

TEST(FusionPlan, NonContiguousOrBroadcastInputsStayUnfused) {
  BlockBuilder b = example();
  Readers rd;
  rd.build(b.g);
  BlockPlan p = plan_block(b.block());
  FusionSpan& sp = p.spans[0];
  sp.rec = {rec(2, 100), rec(2, 100)};
  sp.rec[0].in_contig[0] = 0;        // a transposed operand
  sp.rec[1].in[1].shape = {1, 10};   // a row broadcast over [10, 10]
  plan_segments(b.block(), sp, rd);
  ASSERT_EQ(sp.segs.size(), 2u);
  EXPECT_FALSE(sp.segs[0].fused);
}

}  // namespace
}  // namespace terra::compile
