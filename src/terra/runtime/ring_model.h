// Debug-build check of the co-execution protocol: the host mirrors the GraphRunner's rings of
// recent values (depth max_age + 1, release_after) as it validates ops, and checks that each
// input it matched is the one the runner will read and still holds. A mismatch would leave the
// runner waiting for an abort the host never sends; here it throws std::logic_error at once.
#pragma once
#include <deque>
#include <span>
#include <vector>

#include "terra/graph/symbolic_graph.h"

namespace terra::runtime {

class RingModel {
 public:
  void reset(const graph::SymbolicGraph& g);
  // The host matched `node` at position `pos`; got[i] is where input i came from as the host saw
  // it, phi[i] the candidate it sent for phi inputs (empty when the op sends no message).
  void validate(uint32_t node, uint64_t pos, std::span<const trace::Source> got, std::span<const uint32_t> phi);

 private:
  const graph::SymbolicGraph* g_ = nullptr;
  std::vector<std::deque<bool>> ring_;  // per node: whether each recent execution's value is kept
};

}  // namespace terra::runtime
