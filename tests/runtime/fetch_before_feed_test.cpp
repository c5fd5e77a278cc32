// Appendix C.3: the host fetches opA's value and feeds a value computed from it to opB, which has
// no data dependency on opA. The generated graph carries the control dependency fetch(A) -> feed(B)
// and the co-execution never deadlocks (ctest's timeout bounds this test).
#include <gtest/gtest.h>

#include "runtime/mode_harness.h"
#include "terra/runtime/coexec.h"

using namespace terra;
using namespace terra::testing;

namespace {
void program(Engine& e, const std::function<void(const Tensor&)>& obs) {
  Tensor w = full({3}, 0.5);
  for (int i = 0; i < 10; ++i) {
    auto step = e.step();
    Tensor a = tanh(w * float(i + 1));                 // opA
    float k = a.sum().item<float>();                   // fetch
    Tensor b = sigmoid(tensor({k, -k, 2 * k}, {3}));   // opB fed from the host
    obs(b);
  }
}
}  // namespace

TEST(FetchBeforeFeed, ControlDependencyAndNoDeadlock) {
  Observed eager = run_in_mode(Mode::Eager, program);
  Observed co = run_in_mode(Mode::CoExecution, program);
  expect_same(eager, co, "coexec");
  EXPECT_GT(co.stats.steps - co.stats.traces, 3);

  manual_seed(0);
  Engine e(Mode::CoExecution);
  program(e, [](const Tensor&) {});
  const graph::SymbolicGraph* g = e.coexec()->symbolic_graph();
  ASSERT_NE(g, nullptr);
  const trace::TraceGraph& tg = e.coexec()->trace_graph();
  bool found = false;
  for (auto& d : g->control_deps)
    found |= std::string(tg.node(d.fetch_node)->op->name) == "sum" &&
             std::string(tg.node(d.feed_node)->op->name) == "sigmoid";
  EXPECT_TRUE(found) << g->dot();
}
