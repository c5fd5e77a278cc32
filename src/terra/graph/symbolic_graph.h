// The symbolic graph generated from a TraceGraph (Terra §4.2): per region, an ordered list of
// Switch-Cases (Appendix B) whose cases are basic blocks; loop nodes become While items (unrolled
// when every trace had the same trip count); inputs are graph values, variables, feeds (Input
// Feeding) or explicit phis chosen by the host; fetch points are marked (Output Fetching).
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "terra/graph/case_assignment.h"
#include "terra/trace/trace_graph.h"

namespace terra::graph {

struct Input {
  enum Kind : uint8_t { Value, Variable, Feed, Phi } kind;
  trace::Source src;                        // Value / Variable
  std::shared_ptr<TensorImpl> var;          // Variable: the graph keeps the tensor
  std::vector<trace::Source> candidates;    // Phi: the host says which one each time
  // Feed: per run of the node in a step, the tensor from before the step the last trace fed there
  // (null: none). The host sends the feed only when the call's tensor is another (OpNode::run_predicted).
  std::vector<std::shared_ptr<TensorImpl>> by_run;
};

// A value the runner drops after an op (or a loop): output `out` of `node`'s latest run, or
// every output when out == kAllOutputs.
struct Release {
  static constexpr uint32_t kAllOutputs = ~0u;
  uint32_t node = 0, out = kAllOutputs;
};

struct OpNode {
  uint32_t node = 0;  // TraceGraph node id
  const OpDef* op = nullptr;
  Attrs attrs;
  int64_t symbolic_attrs = 0;  // bit k: attribute k comes with each call's message (TraceGraph Node)
  std::vector<Input> inputs;
  uint32_t num_outputs = 0;
  bool needs_message = false;  // waits for a message from the host: feeds, phis, random keys, symbolic attributes
  // The message is only for phis (no feed, random key or symbolic attribute). The host sends it
  // only when its choices differ from this node's previous ones in the step, or a chosen candidate
  // is not an op's value (it comes as a feed); otherwise the runner waits for the host to validate
  // the position and takes its previous choices again (a loop-carried value: one message per
  // step instead of one per iteration).
  bool phi_predicted = false;
  // The message is only for feeds, phis and symbolic attributes, and the graph predicts them per
  // run of the node in a step (its k-th execution), from the last trace: which producer each phi
  // takes (picks_by_run), which tensor from before the step each feed is (Input::by_run), the
  // attributes (attrs_by_run) -- a loop over layers takes the previous layer's value, its own
  // parameters, its own sizes. For a run below predicted_runs the host sends the message only
  // when the call differs from the prediction (it then carries every phi, the attributes and the
  // feeds that differ); otherwise the runner waits for the host to validate the position and
  // takes the prediction. Later runs follow phi_predicted's rule, or always send.
  bool run_predicted = false;
  uint32_t predicted_runs = 0;
  std::vector<std::vector<uint32_t>> picks_by_run;  // [run][input]: a phi's candidate (~0u: none)
  std::vector<Attrs> attrs_by_run;                  // [run]: with symbolic_attrs, the call's attributes
  // An in-place write that needs no message: runs only once the host validated its position
  // (StepState::host_pos), so no write the host has not reached is ever committed.
  bool wait_validated = false;
  bool fetched = false;        // some output is an Output Fetching point
  std::vector<Release> release_after;  // values no later op of this step reads
};

struct Region;
struct Item {
  bool is_loop = false;
  OpNode op;                      // !is_loop
  uint32_t loop_node = 0;         // is_loop
  int64_t fixed_trips = -1;       // >= 0: unrolled, no Loop Cond
  std::unique_ptr<Region> body;
  // is_loop: values of this block that the loop's body reads last (nothing after the loop does):
  // released once the loop ended, as OpNode::release_after releases after an op.
  std::vector<Release> release_after_loop;
};

struct Case {
  std::vector<Item> block;
  std::vector<EdgeId> control_edges;
};

struct Switch {
  uint32_t id = 0;
  bool needs_select = false;  // a Case Select from the host; false when one case always runs
  std::vector<Case> cases;
  // Values of earlier switches of the region that this one reads last (in whichever case):
  // released once it ran.
  std::vector<Release> release_after;
};

struct Region {
  std::vector<Switch> switches;
};

struct ControlDep {  // Appendix C.3: this fetch must run before that feed
  uint32_t fetch_node, feed_node;
};

struct SymbolicGraph {
  uint64_t uid = 0;  // unique per generated graph (addresses may be reused; this is not)
  Region root;
  // Edge of the TraceGraph -> the (switch, case) pairs it selects.
  std::unordered_map<uint64_t, std::vector<std::pair<uint32_t, uint32_t>>> choices;
  std::vector<uint32_t> max_age;          // per node id: deepest age any input reads
  std::vector<uint8_t> needs_message;     // per node id
  std::vector<uint8_t> phi_predicted;     // per node id (OpNode::phi_predicted)
  std::vector<uint8_t> run_predicted;     // per node id (OpNode::run_predicted)
  std::vector<uint8_t> switch_needs_select;  // per switch id
  std::vector<ControlDep> control_deps;
  uint32_t num_switches = 0;
  // Switch ids of each region in order, keyed by the owning loop node (kRootRegion for the root):
  // the host decides every case-select switch of a region in this order, "skipped" included.
  static constexpr uint32_t kRootRegion = ~0u;
  std::unordered_map<uint32_t, std::vector<uint32_t>> region_switches;
  std::vector<uint32_t> switch_pos;  // per switch id: index in its region's list
  std::vector<const OpNode*> op_of;  // per node id: its OpNode in `root` (null for non-op nodes)

  static uint64_t edge_key(uint32_t from, uint32_t to) { return (uint64_t(from) << 32) | to; }
  std::string dot() const;
};

SymbolicGraph generate(const trace::TraceGraph& tg);

}  // namespace terra::graph
