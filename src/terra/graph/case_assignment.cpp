#include "terra/graph/case_assignment.h"

#include <algorithm>
#include <set>

namespace terra::graph {

std::vector<SwitchSpec> assign_cases(const std::vector<std::vector<uint32_t>>& succ, uint32_t start, uint32_t end) {
  size_t n = succ.size();
  std::vector<std::vector<uint32_t>> pred(n);
  for (uint32_t u = 0; u < n; ++u)
    for (uint32_t v : succ[u]) pred[v].push_back(u);

  std::vector<SwitchSpec> out;
  std::vector<EdgeId> next;  // ordered, unique
  for (uint32_t y : succ[start])
    if (y != end) next.push_back({start, y});
  while (!next.empty()) {
    std::set<EdgeId> next_set(next.begin(), next.end());
    std::vector<uint32_t> targets;
    for (auto& e : next)
      if (std::find(targets.begin(), targets.end(), e.second) == targets.end()) targets.push_back(e.second);
    SwitchSpec sc;
    std::vector<EdgeId> new_next;
    auto push_new = [&](EdgeId e) {
      if (std::find(new_next.begin(), new_next.end(), e) == new_next.end()) new_next.push_back(e);
    };
    for (uint32_t v : targets) {
      CaseSpec c;
      for (auto& e : next)
        if (e.second == v) c.control_edges.push_back(e);
      size_t other_in = 0;  // in-degree of v from edges outside next_edges
      for (uint32_t u : pred[v]) other_in += next_set.count({u, v}) ? 0 : 1;
      if (other_in == 0) {
        c.block.push_back(v);
        while (succ[v].size() == 1 && pred[succ[v][0]].size() == 1 && succ[v][0] != end) {
          v = succ[v][0];
          c.block.push_back(v);
        }
        for (uint32_t y : succ[v])
          if (y != end) push_new({v, y});
      } else {
        for (auto& e : c.control_edges) push_new(e);
      }
      sc.push_back(std::move(c));
    }
    out.push_back(std::move(sc));
    next = std::move(new_next);
  }
  return out;
}

}  // namespace terra::graph
