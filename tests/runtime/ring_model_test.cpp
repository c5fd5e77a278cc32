// The debug-build protocol check (RingModel): the host's mirror of the GraphRunner's value rings
// accepts the sources the runner will read and throws std::logic_error on any other, instead of
// the runner waiting forever for an abort (issue #7, defect 6).
#include <gtest/gtest.h>

#include <string>

#include <terra/terra.h>

#include "terra/runtime/coexec.h"
#include "terra/runtime/ring_model.h"

using namespace terra;
using runtime::RingModel;
using trace::Source;

namespace {

struct Graph {
  Engine engine{Mode::CoExecution};
  uint32_t mul = 0, add = 0, sum = 0;
  const graph::SymbolicGraph* g = nullptr;
  Graph() {
    Tensor w = randn({3});
    for (int s = 0; s < 4; ++s) {
      auto step = engine.step();
      Tensor a = w * 2.0;
      Tensor b = a + 1.0;
      b.sum().item<float>();
    }
    engine.synchronize();
    g = engine.coexec()->symbolic_graph();
    for (uint32_t n = 0; n < g->op_of.size(); ++n) {
      if (!g->op_of[n]) continue;
      std::string name = g->op_of[n]->op->name;
      (name == "mul" ? mul : name == "add" ? add : sum) = n;
    }
  }
  static Source op(uint32_t node, uint32_t age = 0) { return {Source::Op, node, 0, age}; }
  Source var(uint32_t node, size_t input) const { return g->op_of[node]->inputs[input].src; }
};

}  // namespace

TEST(RingModel, AcceptsTheRunnersSourcesAndRejectsOthers) {
  Graph t;
  ASSERT_TRUE(t.g);
  ASSERT_TRUE(t.mul && t.add && t.sum);
  RingModel m;
  m.reset(*t.g);
  Source mul_in[] = {t.var(t.mul, 0), t.var(t.mul, 1)};
  m.validate(t.mul, 0, mul_in, {});
  Source add_in[] = {Graph::op(t.mul), t.var(t.add, 1)};
  m.validate(t.add, 1, add_in, {});
  // sum reads add's value; a host that matched mul's instead disagrees with the runner.
  Source wrong[] = {Graph::op(t.mul)};
  EXPECT_THROW(m.validate(t.sum, 2, wrong, {}), std::logic_error);
  Source older[] = {Graph::op(t.add, 1)};  // an age the runner's ring (depth max_age + 1) lacks
  EXPECT_THROW(m.validate(t.sum, 2, older, {}), std::logic_error);
  Source right[] = {Graph::op(t.add)};
  EXPECT_NO_THROW(m.validate(t.sum, 2, right, {}));
  // mul's value is dropped after its only reader (add): a second add of the same mul must fail.
  EXPECT_THROW(m.validate(t.add, 3, add_in, {}), std::logic_error);
  try {
    m.validate(t.add, 3, add_in, {});
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("no longer holds"), std::string::npos) << e.what();
  }
}
