// TraceGraph::merge's report: whether a trace changed the graph, and why, in words naming the
// first change (TERRA_EXPLAIN prints it). The words are built only for that first change.
#include <gtest/gtest.h>

#include "terra/core/op.h"
#include "terra/trace/trace_graph.h"

using namespace terra;

namespace {

trace::Location at(uintptr_t site) {
  trace::Location loc;
  loc.frames = {site};
  loc.hash = site;
  return loc;
}

// Two adds: the first of host data, the second of the first's output and a tensor from before the
// step, keyed `second_key` (a parameter: the same key every step).
trace::Trace two_adds(uint64_t second_key, uint64_t first_key = 7) {
  const OpDef* add = find_op("add");
  trace::Trace t;
  for (int i = 0; i < 2; ++i) {
    trace::Record r;
    r.op = add;
    r.loc = at(0x100 + uintptr_t(i));
    if (i == 0)
      r.inputs = {trace::RecordSource{true, 0, 0, nullptr, trace::kFreshKey},
                  trace::RecordSource{true, 0, 0, nullptr, first_key}};
    else
      r.inputs = {trace::RecordSource{false, 0, 0, nullptr, 0}, trace::RecordSource{true, 0, 0, nullptr, second_key}};
    r.out_meta = {TensorMeta{{}, DType::Float32}};
    r.fetched = {false};
    t.records.push_back(std::move(r));
  }
  return t;
}

}  // namespace

TEST(TraceGraphMerge, SaysNothingWhenTheTraceIsCovered) {
  trace::TraceGraph g;
  std::string why;
  EXPECT_TRUE(g.merge(two_adds(11), &why));
  EXPECT_EQ(why, "first trace");
  why.clear();
  EXPECT_FALSE(g.merge(two_adds(11), &why));
  EXPECT_EQ(why, "");
}

TEST(TraceGraphMerge, NamesTheFirstChangeOnly) {
  trace::TraceGraph g;
  ASSERT_TRUE(g.merge(two_adds(11)));
  const trace::Node* second = g.root().start->succ.at(0)->succ.at(0);
  std::string why;
  bool generalized = false;
  EXPECT_TRUE(g.merge(two_adds(12), &why, &generalized));
  EXPECT_EQ(why, "new source variable #12 for input 1 of node " + std::to_string(second->id)) << why;
  EXPECT_TRUE(generalized);  // a new tensor where one was: fed from now on, the same structure
  EXPECT_EQ(second->sources.at(1).size(), 1u);
  EXPECT_EQ(second->sources[1][0].kind, trace::Source::External);

  // Both adds change: the report names the first record's.
  const trace::Node* first = g.root().start->succ.at(0);
  why.clear();
  EXPECT_TRUE(g.merge(two_adds(13, 8), &why));
  EXPECT_EQ(why, "new source variable #8 for input 1 of node " + std::to_string(first->id)) << why;
  why.clear();
  EXPECT_FALSE(g.merge(two_adds(14, 9), &why));  // both inputs are feeds now
  EXPECT_EQ(why, "");
}
