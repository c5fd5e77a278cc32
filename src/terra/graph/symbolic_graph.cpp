#include "terra/graph/symbolic_graph.h"

#include "terra/core/small_vector.h"

#include <atomic>

#include <algorithm>
#include <sstream>
#include <unordered_map>

namespace terra::graph {
namespace {

using trace::Node;
using trace::Source;

struct Gen {
  Gen(const trace::TraceGraph& t, SymbolicGraph& s) : tg(t), g(s) {}
  const trace::TraceGraph& tg;
  SymbolicGraph& g;
  // consumers[n]: every input that may read an output of node n
  struct Reader {
    uint32_t node, age, out;
  };
  std::vector<std::vector<Reader>> consumers;  // by node id (sized in generate)

  OpNode make_op(const Node* n) {
    OpNode o;
    o.node = n->id;
    o.op = n->op;
    o.attrs = n->attrs;
    o.symbolic_attrs = n->symbolic_attrs;
    o.num_outputs = n->num_outputs;
    o.fetched = std::find(n->fetched.begin(), n->fetched.end(), true) != n->fetched.end();
    bool msg = n->op->has(kRandom) || n->symbolic_attrs != 0;
    bool phi = false, feed = msg;  // `feed`: a message for something else than phis
    bool unpredicted = n->op->has(kRandom);  // a message for something no run predicts (a random key)
    size_t runs = ~size_t(0);      // runs every phi, feed and symbolic attribute has a prediction for
    if (n->symbolic_attrs) {
      if (n->run_attrs.empty()) unpredicted = true;
      runs = n->run_attrs.size();
    }
    for (size_t i = 0; i < n->sources.size(); ++i) {
      const auto& set = n->sources[i];
      Input in;
      if (set.size() > 1) {
        in.kind = Input::Phi;
        in.candidates = set;
        msg = phi = true;
        const size_t n_picks = i < n->run_picks.size() ? n->run_picks[i].size() : 0;
        if (n_picks == 0) unpredicted = true;
        runs = std::min(runs, n_picks);
      } else if (set[0].kind == Source::External) {
        in.kind = Input::Feed;
        msg = feed = true;
        if (i < n->run_tensors.size()) in.by_run = n->run_tensors[i];
        if (std::none_of(in.by_run.begin(), in.by_run.end(), [](auto& t) { return t != nullptr; })) unpredicted = true;
        runs = std::min(runs, in.by_run.size());
      } else if (set[0].kind == Source::Variable) {
        in.kind = Input::Variable;
        in.src = set[0];
        in.var = n->variables[i];
      } else {
        in.kind = Input::Value;
        in.src = set[0];
      }
      o.inputs.push_back(std::move(in));
    }
    o.needs_message = msg;
    o.phi_predicted = phi && !feed;
    o.run_predicted = msg && !unpredicted && runs > 0 && runs != ~size_t(0);
    if (o.run_predicted) {
      o.predicted_runs = uint32_t(std::min<size_t>(runs, 1u << 20));
      o.picks_by_run.assign(o.predicted_runs, std::vector<uint32_t>(o.inputs.size(), 0));
      for (size_t i = 0; i < o.inputs.size(); ++i)
        if (o.inputs[i].kind == Input::Phi)
          for (uint32_t r = 0; r < o.predicted_runs; ++r) {
            const int32_t k = n->run_picks[i][r];
            o.picks_by_run[r][i] = k >= 0 ? uint32_t(k) : ~0u;
          }
      if (n->symbolic_attrs) o.attrs_by_run.assign(n->run_attrs.begin(), n->run_attrs.begin() + o.predicted_runs);
    }
    o.wait_validated = !msg && n->op->has(kInplace);
    g.needs_message[n->id] = msg;
    g.phi_predicted[n->id] = o.phi_predicted;
    g.run_predicted[n->id] = o.run_predicted;
    return o;
  }

  // Dominance of `v` over the region's end: every path from start to end passes through v. Over
  // the region's local numbering (succ), with scratch vectors: called once per switch.
  static bool dominates_end(const std::vector<std::vector<uint32_t>>& succ, uint32_t start, uint32_t end, uint32_t v,
                            std::vector<uint32_t>& stack, std::vector<char>& seen) {
    seen.assign(succ.size(), 0);
    stack.assign(1, start);
    seen[start] = 1;
    while (!stack.empty()) {
      const uint32_t x = stack.back();
      stack.pop_back();
      if (x == end) return false;
      for (uint32_t s : succ[x])
        if (s != v && !seen[s]) {
          seen[s] = 1;
          stack.push_back(s);
        }
    }
    return true;
  }

  std::vector<uint32_t> local;  // region()'s numbering

  std::unique_ptr<Region> region(const trace::Region& r) {
    auto out = std::make_unique<Region>();
    uint32_t key = r.owner ? r.owner->id : SymbolicGraph::kRootRegion;
    g.region_switches[key];  // every region has a list, possibly empty
    // Local numbering for the case assignment (`local`, by node id, is read only here: the
    // regions of loops below reuse it).
    if (local.size() < tg.num_nodes()) local.resize(tg.num_nodes());
    std::vector<const Node*> by_local;
    for (auto& n : r.nodes) {
      local[n->id] = uint32_t(by_local.size());
      by_local.push_back(n.get());
    }
    std::vector<std::vector<uint32_t>> succ(by_local.size());
    for (auto& n : r.nodes)
      for (const Node* s : n->succ) succ[local[n->id]].push_back(local[s->id]);
    const uint32_t start = local[r.start->id], end = local[r.end->id];
    auto specs = assign_cases(succ, start, end);
    std::vector<uint32_t> stack;
    std::vector<char> seen;
    for (auto& spec : specs) {
      Switch sw;
      sw.id = g.num_switches++;
      for (auto& cs : spec) {
        Case c;
        for (auto [a, b] : cs.control_edges) c.control_edges.push_back({by_local[a]->id, by_local[b]->id});
        for (uint32_t v : cs.block) {
          const Node* n = by_local[v];
          Item it;
          if (n->kind == Node::Loop) {
            it.is_loop = true;
            it.loop_node = n->id;
            it.fixed_trips = n->trip_counts.size() == 1 ? *n->trip_counts.begin() : -1;
            it.body = region(*n->body);
          } else {
            it.op = make_op(n);
          }
          c.block.push_back(std::move(it));
        }
        sw.cases.push_back(std::move(c));
      }
      sw.needs_select = sw.cases.size() > 1 || (!sw.cases[0].block.empty() &&
                                                 !dominates_end(succ, start, end, spec[0].block[0],
                                                                stack, seen));
      for (size_t k = 0; k < sw.cases.size(); ++k)
        for (auto& e : sw.cases[k].control_edges)
          g.choices[SymbolicGraph::edge_key(e.first, e.second)].push_back({sw.id, uint32_t(k)});
      if (g.switch_needs_select.size() <= sw.id) {
        g.switch_needs_select.resize(sw.id + 1);
        g.switch_pos.resize(sw.id + 1);
      }
      g.switch_needs_select[sw.id] = sw.needs_select;  // by id: loop bodies numbered theirs first
      g.switch_pos[sw.id] = uint32_t(g.region_switches[key].size());
      g.region_switches[key].push_back(sw.id);
      out->switches.push_back(std::move(sw));
    }
    return out;
  }

  void collect_consumers(const trace::Region& r) {
    for (auto& n : r.nodes) {
      if (n->kind == Node::Loop) collect_consumers(*n->body);
      if (n->kind != Node::OpCall) continue;
      for (auto& set : n->sources)
        for (auto& s : set)
          if (s.kind == Source::Op) {
            consumers[s.node].push_back({n->id, s.age, s.out});
            g.max_age[s.node] = std::max(g.max_age[s.node], s.age);
          }
    }
  }

  // Where an op runs in a region: its switch, case and item (for an op inside a loop of that
  // case's block: the loop's item).
  struct Place {
    size_t sw, c, item;
  };

  // A value whose every reader runs after it in the same iteration of its region, and that the
  // host never fetches, is dropped after its last reader, as eager's reference counts drop it:
  // - readers in its own block: after the last of them; one inside a loop of the block counts at
  //   the loop's place (autograd's backward often folds into loops that read the forward);
  // - readers in later switches of the region (a loop body's blocks between case selects): once
  //   the last of those switches ran, whichever case it took.
  // Per output: a gradient op's big output may die in the block while a small one (a parameter's
  // gradient) is read by later iterations or after the loop.
  struct DiesAt {
    bool after_switch;  // pos is a switch of the region; else an item of the block
    size_t pos;
    bool operator==(const DiesAt&) const = default;
  };

  void plan_release(Region& r) {
    // Each op node appears once in the graph: a sorted list is the region's map from node to place.
    std::vector<std::pair<uint32_t, Place>> where;
    for (size_t s = 0; s < r.switches.size(); ++s)
      for (size_t ci = 0; ci < r.switches[s].cases.size(); ++ci) {
        const auto& block = r.switches[s].cases[ci].block;
        for (size_t i = 0; i < block.size(); ++i)
          if (!block[i].is_loop) where.push_back({block[i].op.node, {s, ci, i}});
          else index_nested(*block[i].body, {s, ci, i}, where);
      }
    std::sort(where.begin(), where.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t s = 0; s < r.switches.size(); ++s)
      for (size_t ci = 0; ci < r.switches[s].cases.size(); ++ci) {
        auto& block = r.switches[s].cases[ci].block;
        for (size_t i = 0; i < block.size(); ++i) {
          Item& it = block[i];
          if (it.is_loop) {
            plan_release(*it.body);
            continue;
          }
          if (it.op.fetched) continue;
          // Per output, where it dies: after an item of the block, or after a later switch.
          const uint32_t n_out = std::max<uint32_t>(it.op.num_outputs, 1);
          SmallVector<DiesAt, 4> at(n_out, DiesAt{false, i});
          SmallVector<bool, 4> ok(n_out, true);
          for (const Reader& rd : consumers[it.op.node]) {
            const uint32_t o = rd.out < n_out ? rd.out : 0;
            auto p = std::lower_bound(where.begin(), where.end(), rd.node,
                                      [](const auto& e, uint32_t node) { return e.first < node; });
            if (rd.age != 0 || p == where.end() || p->first != rd.node) {
              ok[o] = false;
              continue;
            }
            const Place& q = p->second;
            if (q.sw == s && q.c == ci && q.item > i) {
              if (!at[o].after_switch) at[o].pos = std::max(at[o].pos, q.item);
            } else if (q.sw > s) {
              at[o] = {true, at[o].after_switch ? std::max(at[o].pos, q.sw) : q.sw};
            } else {
              ok[o] = false;
            }
          }
          auto release = [&](DiesAt where_, uint32_t out) {
            const Release rel{it.op.node, out};
            if (where_.after_switch) {
              r.switches[where_.pos].release_after.push_back(rel);
              return;
            }
            Item& x = block[where_.pos];
            (x.is_loop ? x.release_after_loop : x.op.release_after).push_back(rel);
          };
          bool all_same = true;
          for (uint32_t o = 0; o < n_out; ++o) all_same &= ok[o] && at[o] == at[0];
          if (all_same) {
            release(at[0], Release::kAllOutputs);
            continue;
          }
          for (uint32_t o = 0; o < n_out; ++o)
            if (ok[o]) release(at[o], o);
        }
      }
  }

  // Every op node inside `r` (at any depth) is placed at `p`, its outermost loop's place.
  static void index_nested(const Region& r, Place p, std::vector<std::pair<uint32_t, Place>>& where) {
    for (auto& sw : r.switches)
      for (auto& c : sw.cases)
        for (auto& it : c.block)
          if (it.is_loop) index_nested(*it.body, p, where);
          else where.push_back({it.op.node, p});
  }

  void index_ops(const Region& r) {
    for (auto& sw : r.switches)
      for (auto& c : sw.cases)
        for (auto& it : c.block)
          if (it.is_loop) index_ops(*it.body);
          else g.op_of[it.op.node] = &it.op;
  }

  std::vector<uint32_t> seen_at;  // control_deps' walks
  std::vector<const Node*> walk_stack;
  uint32_t walks = 0;

  void control_deps(const trace::Region& r) {
    for (auto& n : r.nodes) {
      if (n->kind == Node::Loop) control_deps(*n->body);
      if (n->kind != Node::OpCall || !g.needs_message[n->id]) continue;
      bool feed = false;
      for (auto& set : n->sources)
        for (auto& s : set) feed |= s.kind == Source::External;
      if (!feed) continue;
      // every fetch point that precedes this feed in the region's order (a walk per feed: marks
      // by node id, stamped per walk, not a hash set)
      if (seen_at.size() < tg.num_nodes()) seen_at.resize(tg.num_nodes(), 0);
      const uint32_t walk = ++walks;
      walk_stack.assign(n->pred.begin(), n->pred.end());
      for (const Node* p : walk_stack) seen_at[p->id] = walk;
      while (!walk_stack.empty()) {
        const Node* x = walk_stack.back();
        walk_stack.pop_back();
        if (x->kind == Node::OpCall && std::find(x->fetched.begin(), x->fetched.end(), true) != x->fetched.end())
          g.control_deps.push_back({x->id, n->id});
        for (const Node* p : x->pred)
          if (seen_at[p->id] != walk) {
            seen_at[p->id] = walk;
            walk_stack.push_back(p);
          }
      }
    }
  }
};

void dot_region(std::ostringstream& os, const Region& r, int& cluster) {
  for (auto& sw : r.switches) {
    os << "  subgraph cluster_" << cluster++ << " { label=\"switch " << sw.id
       << (sw.needs_select ? " (case select)" : "") << "\";\n";
    for (size_t k = 0; k < sw.cases.size(); ++k) {
      os << "  subgraph cluster_" << cluster++ << " { label=\"case " << k << "\";\n";
      const Case& c = sw.cases[k];
      if (c.block.empty()) os << "  empty_" << sw.id << "_" << k << " [label=\"X\",shape=plaintext];\n";
      for (size_t i = 0; i < c.block.size(); ++i) {
        const Item& it = c.block[i];
        if (it.is_loop) {
          os << "  subgraph cluster_" << cluster++ << " { label=\"While (loop " << it.loop_node << ", "
             << (it.fixed_trips >= 0 ? "unrolled x" + std::to_string(it.fixed_trips) : std::string("loop cond"))
             << ")\";\n";
          dot_region(os, *it.body, cluster);
          os << "  }\n";
          continue;
        }
        const OpNode& o = it.op;
        os << "  g" << o.node << " [label=\"" << o.node << ": " << o.op->name;
        for (auto& in : o.inputs)
          if (in.kind == Input::Feed) os << (it.op.run_predicted ? " [feed by run]" : " [feed]");
          else if (in.kind == Input::Phi) os << (it.op.run_predicted ? " [phi by run]" : " [phi]");
        if (o.fetched) os << " [fetch]";
        os << "\"];\n";
        for (auto& in : o.inputs)
          if (in.kind == Input::Value) os << "  g" << in.src.node << " -> g" << o.node << ";\n";
          else if (in.kind == Input::Phi)
            for (auto& s : in.candidates)
              if (s.kind == trace::Source::Op) os << "  g" << s.node << " -> g" << o.node << " [style=dashed];\n";
      }
      os << "  }\n";
    }
    os << "  }\n";
  }
}

}  // namespace

SymbolicGraph generate(const trace::TraceGraph& tg) {
  static std::atomic<uint64_t> next_uid{1};
  SymbolicGraph g;
  g.uid = next_uid.fetch_add(1, std::memory_order_relaxed);
  g.max_age.assign(tg.num_nodes(), 0);
  g.needs_message.assign(tg.num_nodes(), 0);
  g.phi_predicted.assign(tg.num_nodes(), 0);
  g.run_predicted.assign(tg.num_nodes(), 0);
  Gen gen(tg, g);
  gen.consumers.resize(tg.num_nodes());
  gen.collect_consumers(tg.root());
  g.root = std::move(*gen.region(tg.root()));
  gen.plan_release(g.root);
  gen.control_deps(tg.root());
  g.op_of.assign(tg.num_nodes(), nullptr);
  gen.index_ops(g.root);  // the vectors' buffers survive moving `g`: the pointers stay valid
  return g;
}

std::string SymbolicGraph::dot() const {
  std::ostringstream os;
  os << "digraph SymbolicGraph {\n  compound=true;\n";
  int cluster = 0;
  dot_region(os, root, cluster);
  for (auto& d : control_deps)
    os << "  g" << d.fetch_node << " -> g" << d.feed_node << " [style=dotted,color=red,label=\"ctrl\"];\n";
  os << "}\n";
  return os.str();
}

}  // namespace terra::graph
