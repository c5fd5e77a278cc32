// TraceGraph (Terra §4.2, Appendix A): traces merged into a DAG of op nodes with start/end nodes.
// Matching compares op, attributes and location among the children of the last matched node;
// a new trace branches off and merges back where a later op matches. A location that repeats on
// the current path becomes a loop node whose body is a region of its own (nested loops nest).
#pragma once
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "terra/trace/trace.h"

namespace terra::trace {

struct Region;

// An accepted producer of one node input.
struct Source {
  enum Kind : uint8_t { Op, Variable, External } kind = External;
  uint32_t node = 0, out = 0, age = 0;  // Op: output `out` of `node`, `age` executions ago
  uint64_t var_id = 0;                  // Variable: the same tensor in every trace so far
  bool operator==(const Source& o) const {
    return kind == o.kind && node == o.node && out == o.out && age == o.age && var_id == o.var_id;
  }
  std::string str() const;
};

struct Node {
  enum Kind : uint8_t { Start, End, OpCall, Loop } kind;
  uint32_t id = 0;
  Region* region = nullptr;
  std::vector<Node*> succ, pred;

  // OpCall
  const OpDef* op = nullptr;
  Attrs attrs;
  Location loc;
  std::vector<std::vector<Source>> sources;  // per input: producers seen in traces
  std::vector<std::shared_ptr<TensorImpl>> variables;  // per input: the tensor of its Variable source
  std::vector<bool> fetched;                 // per output: a fetch point
  // Per input, per run of the node in the latest trace that ran it (the k-th execution in its
  // step): the tensor from before the step it took, or null. A call site in a loop over layers
  // takes another parameter each iteration, so its input is fed; the graph predicts the feed by
  // run from this, and the host sends one only when the call's tensor differs (graph::OpNode::run_predicted).
  std::vector<std::vector<std::shared_ptr<TensorImpl>>> run_tensors;
  // Per input, per run as above: the index in `sources` of the producer it took (-1: none). With
  // run_tensors, the graph's prediction of which value each run of a loop-carried input reads.
  std::vector<std::vector<int32_t>> run_picks;
  std::vector<Attrs> run_attrs;  // per run as above: the call's attributes (symbolic ones vary by run)
  uint32_t num_outputs = 0;
  // Bit k: attribute k took different values at this call site (a symbolic dimension, a mutated
  // hyper-parameter); the host sends the call's own value every time instead of the graph baking it.
  int64_t symbolic_attrs = 0;

  // Loop
  std::unique_ptr<Region> body;
  std::set<int64_t> trip_counts;

  // `arity`: the call's input count, part of its identity (cat of a list whose length changes is
  // another call: the node's per-input sources would not fit it).
  bool matches(const OpDef* o, const Attrs& a, const Location& l, size_t arity) const {
    return kind == OpCall && op == o && sources.size() == arity && loc == l && attrs == a;
  }
  // The same call site with attribute values that may differ (guards hold): the mask of those that do, or -1.
  int64_t matches_varying(const OpDef* o, const Attrs& a, const Location& l, size_t arity) const {
    return kind == OpCall && op == o && sources.size() == arity && loc == l ? attrs.varying(a) : -1;
  }
  bool has_succ(const Node* n) const;
  std::string label() const;
  std::string symbolic_str() const;  // names of the symbolic attributes, "" if none
};

struct Region {
  Node* start = nullptr;
  Node* end = nullptr;
  Node* owner = nullptr;  // the loop node whose body this is; null for the root
  std::vector<std::unique_ptr<Node>> nodes;  // includes start and end
};

class TraceGraph;

// Walks a TraceGraph alongside a running program, one op call at a time. Used both to merge a
// finished trace and, in co-execution, to validate the skeleton's calls online.
class Cursor {
 public:
  struct Event {  // what the walk did before landing on the matched node
    enum Kind : uint8_t { Edge, LoopIterate, LoopExit } kind;
    const Node* from = nullptr;
    const Node* to = nullptr;  // Edge: the edge taken; Loop*: the loop node
    int64_t iteration = 0;     // LoopExit: trip count of the loop just left
  };
  struct Frame {
    Region* region;
    Node* cur;
    int64_t iteration = 0;    // 1-based iteration of the loop owning `region`
    // Nodes visited in this region since the iteration began, for extend(); a strict cursor
    // (co-execution's, which never extends the graph) keeps none.
    std::vector<Node*> path;
  };

  // Strict: a walk that only follows the graph (co-execution's skeleton), where a loop takes no
  // more iterations than its traces had; merging uses a cursor that is not.
  explicit Cursor(TraceGraph& g, bool strict_trip_counts);
  // The node matching the call, or null. `events` receives the edges/loop decisions taken. A
  // successor equal in op, location and attributes wins; else one whose attribute values differ
  // (same names, types and ranks): `varied` then receives the mask of those attributes.
  Node* match(const OpDef* op, const Attrs& a, const Location& l, size_t arity, std::vector<Event>* events,
              int64_t* varied = nullptr);
  // The node match() would take first if the call's location is that node's: the first successor
  // of the walk's position equal in op, attributes and arity, or, after a loop body's last op, the
  // first such op of the body's next iteration (`iterate`). Null if none. A caller that finds the
  // call's location equal (trace::location_is) takes it with take(); otherwise match() decides.
  Node* predict(const OpDef* op, const Attrs& a, size_t arity, bool* iterate) const;
  Node* take(Node* n, bool iterate, std::vector<Event>* events);
  // The node the walk stands on (the `from` of the next edge take() records).
  const Node* position() const { return frames_.back().cur; }
  // Why no successor of the walk's position took the call though one has its op and location
  // (the guard that failed), or "" -- for explain output after match() returned null.
  std::string near_miss(const OpDef* op, const Attrs& a, const Location& l, size_t arity) const;
  // True if the walk can end the step here (exits open loops, takes an edge to end).
  bool can_finish() const;
  void finish(std::vector<Event>* events);
  std::vector<uint32_t>& exec_count() { return exec_count_; }

 private:
  friend class TraceGraph;
  bool loop_accepts(const Node* loop, const OpDef* op, const Attrs& a, const Location& l, size_t arity,
                    bool varying) const;
  TraceGraph& g_;
  bool strict_;
  std::vector<Frame> frames_;
  std::vector<uint32_t> exec_count_;  // per node id: executions so far in this step
};

class TraceGraph {
 public:
  TraceGraph();
  // Merges a trace; returns false if the trace was already fully covered (nothing changed).
  // `why`, if given, receives what the first change was (for explain output). `only_generalized`,
  // if given, is set when every change only generalized existing nodes (attributes became symbolic,
  // an input became a feed): no new node, edge, producer, fetch point or trip count.
  bool merge(const Trace& t, std::string* why = nullptr, bool* only_generalized = nullptr);
  Region& root() { return *root_; }
  const Region& root() const { return *root_; }
  Node* node(uint32_t id) const { return nodes_[id]; }
  size_t num_nodes() const { return nodes_.size(); }
  bool empty() const { return root_->start->succ.empty(); }
  std::string dot() const;  // Graphviz

 private:
  friend class Cursor;
  Node* new_node(Region* r, Node::Kind k);
  Node* extend(Cursor& c, const Record& rec, bool& changed);
  Node* try_collapse_loop(Cursor& c, size_t k);
  static void link(Node* a, Node* b);
  bool reaches(const Node* from, const Node* to) const;
  std::unique_ptr<Region> root_;
  std::vector<Node*> nodes_;  // by id
};

// The source of an input seen in a trace, as the graph records it.
Source to_source(const RecordSource& rs, const std::vector<uint32_t>& rec_node,
                 const std::vector<uint32_t>& rec_exec, const std::vector<uint32_t>& exec_count);
// Adds `s` to an input's accepted set; an External source subsumes Variable ones. Returns true if new.
bool add_source(Node& n, size_t input, const Source& s, const std::shared_ptr<TensorImpl>& var);

}  // namespace terra::trace
