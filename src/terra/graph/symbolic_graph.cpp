#include "terra/graph/symbolic_graph.h"

#include <atomic>

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace terra::graph {
namespace {

using trace::Node;
using trace::Source;

struct Gen {
  const trace::TraceGraph& tg;
  SymbolicGraph& g;
  // consumers[n]: every input that may read an output of node n
  struct Reader {
    uint32_t node, age, out;
  };
  std::unordered_map<uint32_t, std::vector<Reader>> consumers;

  OpNode make_op(const Node* n) {
    OpNode o;
    o.node = n->id;
    o.op = n->op;
    o.attrs = n->attrs;
    o.symbolic_attrs = n->symbolic_attrs;
    o.num_outputs = n->num_outputs;
    o.fetched = std::find(n->fetched.begin(), n->fetched.end(), true) != n->fetched.end();
    bool msg = n->op->has(kRandom) || n->symbolic_attrs != 0;
    for (size_t i = 0; i < n->sources.size(); ++i) {
      const auto& set = n->sources[i];
      Input in;
      if (set.size() > 1) {
        in.kind = Input::Phi;
        in.candidates = set;
        msg = true;
      } else if (set[0].kind == Source::External) {
        in.kind = Input::Feed;
        msg = true;
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
    o.wait_validated = !msg && n->op->has(kInplace);
    g.needs_message[n->id] = msg;
    return o;
  }

  // Dominance of `v` over the region's end: every path from start to end passes through v.
  static bool dominates_end(const trace::Region& r, const Node* v) {
    std::vector<const Node*> stack{r.start};
    std::unordered_set<const Node*> seen{r.start};
    while (!stack.empty()) {
      const Node* x = stack.back();
      stack.pop_back();
      if (x == r.end) return false;
      for (const Node* s : x->succ)
        if (s != v && seen.insert(s).second) stack.push_back(s);
    }
    return true;
  }

  std::unique_ptr<Region> region(const trace::Region& r) {
    auto out = std::make_unique<Region>();
    uint32_t key = r.owner ? r.owner->id : SymbolicGraph::kRootRegion;
    g.region_switches[key];  // every region has a list, possibly empty
    // Local numbering for the case assignment.
    std::unordered_map<const Node*, uint32_t> local;
    std::vector<const Node*> by_local;
    for (auto& n : r.nodes) {
      local[n.get()] = uint32_t(by_local.size());
      by_local.push_back(n.get());
    }
    std::vector<std::vector<uint32_t>> succ(by_local.size());
    for (auto& n : r.nodes)
      for (const Node* s : n->succ) succ[local[n.get()]].push_back(local[s]);
    auto specs = assign_cases(succ, local[r.start], local[r.end]);
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
      sw.needs_select = sw.cases.size() > 1 ||
                        (!sw.cases[0].block.empty() && !dominates_end(r, by_local[spec[0].block[0]]));
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

  // Within one basic block, a value whose every reader follows it in the same block (same
  // iteration) and that the host never fetches can be dropped after its last reader. A reader
  // inside a loop of the block counts at the loop's place: the value is dropped once the loop
  // ended (autograd's backward often folds into loops that read the forward's activations).
  void plan_release(Region& r) {
    for (auto& sw : r.switches)
      for (auto& c : sw.cases) {
        std::unordered_map<uint32_t, size_t> pos;
        for (size_t i = 0; i < c.block.size(); ++i)
          if (!c.block[i].is_loop) pos[c.block[i].op.node] = i;
          else index_nested(*c.block[i].body, i, pos);
        for (size_t i = 0; i < c.block.size(); ++i) {
          Item& it = c.block[i];
          if (it.is_loop) {
            plan_release(*it.body);
            continue;
          }
          if (it.op.fetched) continue;
          // Per output: a gradient op's big output may die in the block while a small one (a
          // parameter's gradient) is read by later iterations or after the loop.
          const uint32_t n_out = std::max<uint32_t>(it.op.num_outputs, 1);
          std::vector<size_t> last(n_out, i);
          std::vector<bool> local(n_out, true);
          for (const Reader& rd : consumers[it.op.node]) {
            const uint32_t o = rd.out < n_out ? rd.out : 0;
            auto p = pos.find(rd.node);
            if (rd.age != 0 || p == pos.end() || p->second <= i) local[o] = false;
            else last[o] = std::max(last[o], p->second);
          }
          auto release = [&](size_t at, uint32_t out) {
            Item& x = c.block[at];
            (x.is_loop ? x.release_after_loop : x.op.release_after).push_back({it.op.node, out});
          };
          bool all_same = true;
          for (uint32_t o = 0; o < n_out; ++o) all_same &= local[o] && last[o] == last[0];
          if (all_same) {
            release(last[0], Release::kAllOutputs);
            continue;
          }
          for (uint32_t o = 0; o < n_out; ++o)
            if (local[o]) release(last[o], o);
        }
      }
  }

  // Every op node inside `r` (at any depth) maps to `at`, the index of its outermost loop.
  static void index_nested(const Region& r, size_t at, std::unordered_map<uint32_t, size_t>& pos) {
    for (auto& sw : r.switches)
      for (auto& c : sw.cases)
        for (auto& it : c.block)
          if (it.is_loop) index_nested(*it.body, at, pos);
          else pos[it.op.node] = at;
  }

  void index_ops(const Region& r) {
    for (auto& sw : r.switches)
      for (auto& c : sw.cases)
        for (auto& it : c.block)
          if (it.is_loop) index_ops(*it.body);
          else g.op_of[it.op.node] = &it.op;
  }

  void control_deps(const trace::Region& r) {
    for (auto& n : r.nodes) {
      if (n->kind == Node::Loop) control_deps(*n->body);
      if (n->kind != Node::OpCall || !g.needs_message[n->id]) continue;
      bool feed = false;
      for (auto& set : n->sources)
        for (auto& s : set) feed |= s.kind == Source::External;
      if (!feed) continue;
      // every fetch point that precedes this feed in the region's order
      std::vector<const Node*> stack(n->pred.begin(), n->pred.end());
      std::unordered_set<const Node*> seen(stack.begin(), stack.end());
      while (!stack.empty()) {
        const Node* x = stack.back();
        stack.pop_back();
        if (x->kind == Node::OpCall && std::find(x->fetched.begin(), x->fetched.end(), true) != x->fetched.end())
          g.control_deps.push_back({x->id, n->id});
        for (const Node* p : x->pred)
          if (seen.insert(p).second) stack.push_back(p);
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
          if (in.kind == Input::Feed) os << " [feed]";
          else if (in.kind == Input::Phi) os << " [phi]";
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
  Gen gen{tg, g, {}};
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
