// Terra's case assignment (supplement, Appendix B, Algorithm 1): turns a DAG with start/end
// nodes into an ordered list of switch-cases whose cases are linear chains (basic blocks).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace terra::graph {

using EdgeId = std::pair<uint32_t, uint32_t>;  // (from, to)

struct CaseSpec {
  std::vector<uint32_t> block;        // linear chain; empty: nothing runs for these edges here
  std::vector<EdgeId> control_edges;  // edges that select this case
};
using SwitchSpec = std::vector<CaseSpec>;

// `succ[v]` lists v's successors; `start`/`end` are node ids in the same numbering.
std::vector<SwitchSpec> assign_cases(const std::vector<std::vector<uint32_t>>& succ, uint32_t start, uint32_t end);

}  // namespace terra::graph
