// Appendix B's case assignment. The property the GraphRunner relies on: for every path from start
// to end, walking the switch-cases in order and taking, in each, the case whose control edge the
// path uses (or nothing) reproduces exactly the path's nodes in order.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "terra/graph/case_assignment.h"

using namespace terra::graph;

namespace {

using Succ = std::vector<std::vector<uint32_t>>;

void all_paths(const Succ& g, uint32_t v, uint32_t end, std::vector<uint32_t>& cur, std::vector<std::vector<uint32_t>>& out) {
  if (v == end) {
    out.push_back(cur);
    return;
  }
  for (uint32_t w : g[v]) {
    cur.push_back(w);
    all_paths(g, w, end, cur, out);
    cur.pop_back();
  }
}

// Replays `path` (start ... end) through the switch-cases; returns the nodes the cases run.
std::vector<uint32_t> replay(const std::vector<SwitchSpec>& sc, const std::vector<uint32_t>& path) {
  std::set<EdgeId> edges;
  for (size_t i = 0; i + 1 < path.size(); ++i) edges.insert({path[i], path[i + 1]});
  std::vector<uint32_t> ran;
  for (const SwitchSpec& s : sc) {
    int taken = -1;
    for (size_t c = 0; c < s.size(); ++c)
      for (const EdgeId& e : s[c].control_edges)
        if (edges.count(e)) {
          EXPECT_TRUE(taken == -1 || taken == int(c)) << "two cases of one switch selected";
          taken = int(c);
        }
    if (taken >= 0) ran.insert(ran.end(), s[size_t(taken)].block.begin(), s[size_t(taken)].block.end());
  }
  return ran;
}

void check_covers(const Succ& g, uint32_t start, uint32_t end) {
  auto sc = assign_cases(g, start, end);
  std::vector<std::vector<uint32_t>> paths;
  std::vector<uint32_t> cur;
  all_paths(g, start, end, cur, paths);
  std::set<uint32_t> assigned;
  for (auto& s : sc)
    for (auto& c : s)
      for (uint32_t v : c.block) EXPECT_TRUE(assigned.insert(v).second) << "node " << v << " in two blocks";
  for (auto& p : paths) {
    std::vector<uint32_t> nodes(p.begin(), p.end() - 1);  // without end
    EXPECT_EQ(replay(sc, [&] { auto q = p; q.insert(q.begin(), start); return q; }()), nodes);
  }
}

}  // namespace

// start=0, end=10. 1 branches three ways; two branches rejoin at 8, the third reaches 8 only
// through 7, which also comes from a later wave: at 8's first visit an empty case carries edges.
TEST(CaseAssignment, BranchesMergeAndEmptyCase) {
  Succ g(11);
  g[0] = {1};
  g[1] = {2, 4, 6};
  g[2] = {3};
  g[3] = {8};
  g[4] = {5};
  g[5] = {8, 7};
  g[6] = {7};
  g[7] = {8};
  g[8] = {9};
  g[9] = {10};
  auto sc = assign_cases(g, 0, 10);
  ASSERT_EQ(sc.size(), 4u);
  ASSERT_EQ(sc[0].size(), 1u);
  EXPECT_EQ(sc[0][0].block, (std::vector<uint32_t>{1}));
  ASSERT_EQ(sc[1].size(), 3u);
  EXPECT_EQ(sc[1][0].block, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(sc[1][1].block, (std::vector<uint32_t>{4, 5}));
  EXPECT_EQ(sc[1][2].block, (std::vector<uint32_t>{6}));
  // wave 3: 8 still has an unprocessed in-edge (7->8): its case is empty and keeps its edges;
  // 7's in-edges (5->7, 6->7) are both here, so 7 becomes a block.
  ASSERT_EQ(sc[2].size(), 2u);
  EXPECT_TRUE(sc[2][0].block.empty());
  EXPECT_EQ(sc[2][0].control_edges, (std::vector<EdgeId>{{3, 8}, {5, 8}}));
  EXPECT_EQ(sc[2][1].block, (std::vector<uint32_t>{7}));
  ASSERT_EQ(sc[3].size(), 1u);
  EXPECT_EQ(sc[3][0].block, (std::vector<uint32_t>{8, 9}));
  EXPECT_EQ(sc[3][0].control_edges, (std::vector<EdgeId>{{3, 8}, {5, 8}, {7, 8}}));
  check_covers(g, 0, 10);
}

// Theorem 1 on random DAGs, including paths that reach end early (early return from a step).
TEST(CaseAssignment, CoversEveryPathOfRandomDags) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    uint32_t n = 3 + rng() % 9;  // nodes 1..n, start 0, end n+1
    uint32_t end = n + 1;
    Succ g(n + 2);
    g[0].push_back(1);
    for (uint32_t v = 1; v <= n; ++v) {
      std::set<uint32_t> out;
      out.insert(v + 1 <= n ? v + 1 : end);  // keeps every node reachable and able to finish
      for (int k = 0; k < int(rng() % 3); ++k) out.insert(v + 1 + rng() % (end - v));
      g[v].assign(out.begin(), out.end());
    }
    check_covers(g, 0, end);
    if (HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
}
