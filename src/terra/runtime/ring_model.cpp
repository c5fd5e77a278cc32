#include "terra/runtime/ring_model.h"

#include <stdexcept>
#include <string>

#include "terra/runtime/graph_runner.h"

namespace terra::runtime {

void RingModel::reset(const graph::SymbolicGraph& g) {
  g_ = &g;
  ring_.assign(g.max_age.size(), {});
}

void RingModel::validate(uint32_t node, uint64_t pos, std::span<const trace::Source> got,
                         std::span<const uint32_t> phi) {
  auto fail = [&](size_t i, const std::string& why) {
    throw std::logic_error("[coexec] protocol mismatch at position " + std::to_string(pos) + ", input " +
                           std::to_string(i) + " of node " + std::to_string(node) + ": " + why);
  };
  const graph::OpNode* op = node < g_->op_of.size() ? g_->op_of[node] : nullptr;
  if (!op) fail(0, "the symbolic graph has no op for this node");
  if (op->inputs.size() != got.size()) fail(0, "input count differs from the graph's");
  for (size_t i = 0; i < got.size(); ++i) {
    const graph::Input& x = op->inputs[i];
    trace::Source reads;  // what the runner will read for this input
    switch (x.kind) {
      case graph::Input::Value: reads = x.src; break;
      case graph::Input::Variable: reads = x.src; break;
      case graph::Input::Feed: reads.kind = trace::Source::External; break;
      case graph::Input::Phi:
        if (i >= phi.size() || phi[i] >= x.candidates.size()) fail(i, "the phi index sent is out of range");
        reads = x.candidates[phi[i]];
        break;
    }
    bool host_op = got[i].kind == trace::Source::Op;
    if (reads.kind != trace::Source::Op) {
      if (host_op) fail(i, "the host matched " + got[i].str() + ", the runner reads " + reads.str());
      continue;
    }
    if (!(reads == got[i])) fail(i, "the host matched " + got[i].str() + ", the runner reads " + reads.str());
    const auto& ring = ring_[reads.node];
    size_t k = ring_index(reads, node);
    if (k >= ring.size() || !ring[k])
      fail(i, "the runner no longer holds " + reads.str() + " (ring depth " + std::to_string(ring.size()) +
                  (k < ring.size() ? ", released" : "") + ")");
  }
  auto& mine = ring_[node];
  mine.push_front(true);
  if (mine.size() > size_t(g_->max_age[node]) + 1) mine.pop_back();
  // Whole values only: a released output, or a value released after a loop, is still counted as
  // held (the check is looser there, never stricter than the runner).
  for (const graph::Release& r : op->release_after)
    if (r.out == graph::Release::kAllOutputs && !ring_[r.node].empty()) ring_[r.node].front() = false;
}

}  // namespace terra::runtime
