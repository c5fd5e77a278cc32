#include "terra/trace/trace_graph.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

namespace terra::trace {

std::string Source::str() const {
  std::ostringstream os;
  switch (kind) {
    case Op: os << "node " << node << ":" << out << (age ? " (" + std::to_string(age) + " executions ago)" : ""); break;
    case Variable: os << "variable #" << var_id; break;
    case External: os << "external"; break;
  }
  return os.str();
}

bool Node::has_succ(const Node* n) const { return std::find(succ.begin(), succ.end(), n) != succ.end(); }

std::string Node::symbolic_str() const {
  std::string s;
  for (size_t k = 0; k < attrs.items().size(); ++k)
    if (symbolic_attrs >> k & 1) s.append(s.empty() ? "" : ",").append(attrs.items()[k].first);
  return s;
}

std::string Node::label() const {
  switch (kind) {
    case Start: return "start";
    case End: return "end";
    case Loop: return "loop " + std::to_string(id);
    case OpCall: {
      // Appended, not "(" + str(): g++ 12's -Wrestrict misfires on operator+(const char*, string&&).
      std::string s = op->name;
      if (!attrs.empty()) s.append("(").append(attrs.str()).append(")");
      return s;
    }
  }
  return "?";
}

// ---------------------------------------------------------------- Cursor

Cursor::Cursor(TraceGraph& g, bool strict) : g_(g), strict_(strict) {
  frames_.push_back({g.root_.get(), g.root_->start, 1, {}});
  exec_count_.assign(g.num_nodes(), 0);
}

bool Cursor::loop_accepts(const Node* loop, const OpDef* op, const Attrs& a, const Location& l, size_t arity,
                          bool varying) const {
  for (const Node* ch : loop->body->start->succ) {
    if (ch->matches(op, a, l, arity) || (varying && ch->matches_varying(op, a, l, arity) >= 0)) return true;
    if (ch->kind == Node::Loop && loop_accepts(ch, op, a, l, arity, varying)) return true;
  }
  return false;
}

static int64_t fixed_trips(const Node* loop) {
  return loop->trip_counts.size() == 1 ? *loop->trip_counts.begin() : -1;
}

// The last op of a loop body (its one successor the body's end) goes straight to the iteration or
// the exit: no successor to match, no loop to enter.
static bool body_ends_after(const Cursor::Frame& f) { return f.cur->succ.size() == 1 && f.cur->succ[0] == f.region->end; }

Node* Cursor::predict(const OpDef* op, const Attrs& a, size_t arity, bool* iterate) const {
  const Frame& f = frames_.back();
  const std::vector<Node*>* next = &f.cur->succ;
  *iterate = body_ends_after(f);
  if (*iterate) {  // match() iterates if the body's start has an exact match, within the trip count
    const Node* loop = f.region->owner;
    if (!loop) return nullptr;
    if (const int64_t fixed = strict_ ? fixed_trips(loop) : -1; fixed >= 0 && f.iteration >= fixed) return nullptr;
    next = &f.region->start->succ;
  }
  for (Node* ch : *next)
    if (ch->kind == Node::OpCall && ch->op == op && ch->sources.size() == arity && ch->attrs == a) return ch;
  return nullptr;
}

Node* Cursor::take(Node* ch, bool iterate, std::vector<Event>* ev) {
  if (exec_count_.size() < g_.num_nodes()) exec_count_.resize(g_.num_nodes(), 0);
  Frame& f = frames_.back();
  if (iterate) {
    if (ev) ev->push_back({Event::LoopIterate, f.cur, f.region->owner});
    f.iteration++;
    f.cur = f.region->start;
    f.path.clear();
  }
  if (ev) ev->push_back({Event::Edge, f.cur, ch});
  f.cur = ch;
  if (!strict_) f.path.push_back(ch);
  exec_count_[ch->id]++;
  return ch;
}

Node* Cursor::match(const OpDef* op, const Attrs& a, const Location& l, size_t arity, std::vector<Event>* ev,
                    int64_t* varied) {
  if (exec_count_.size() < g_.num_nodes()) exec_count_.resize(g_.num_nodes(), 0);
  if (varied) *varied = 0;
  for (;;) {
    Frame& f = frames_.back();
    auto take = [&](Node* ch) { return this->take(ch, false, ev); };
    const bool at_end = body_ends_after(f);
    if (!at_end)
      for (Node* ch : f.cur->succ)
        if (ch->matches(op, a, l, arity)) return take(ch);
    // Exact first (successor, then loop entry), then the same call sites with other attribute values.
    Node* entered = nullptr;
    for (int pass = 0; pass < 2 && !entered && !at_end; ++pass) {
      for (Node* ch : f.cur->succ)
        if (ch->kind == Node::Loop && loop_accepts(ch, op, a, l, arity, pass == 1)) {
          entered = ch;
          break;
        }
      if (pass == 0 && !entered)
        for (Node* ch : f.cur->succ)
          if (int64_t m = ch->matches_varying(op, a, l, arity); m >= 0) {
            if (varied) *varied = m;
            return take(ch);
          }
    }
    if (entered) {
      if (ev) ev->push_back({Event::Edge, f.cur, entered});
      f.cur = entered;
      if (!strict_) f.path.push_back(entered);
      frames_.push_back({entered->body.get(), entered->body->start, 1, {}});
      continue;
    }
    Region* r = f.region;
    if (r->owner && (at_end || f.cur->has_succ(r->end))) {
      Node* loop = r->owner;
      int64_t fixed = strict_ ? fixed_trips(loop) : -1;
      bool again = false;
      Node* exact = nullptr;  // the first exact match: what the next round would take (one compare, not two)
      for (Node* ch : r->start->succ) {
        if (!exact && ch->matches(op, a, l, arity)) {
          exact = ch;
          again = true;
          break;
        }
        again |= ch->matches_varying(op, a, l, arity) >= 0 ||
                 (ch->kind == Node::Loop && loop_accepts(ch, op, a, l, arity, true));
      }
      if (again) {
        if (fixed >= 0 && f.iteration >= fixed) return nullptr;  // more iterations than every trace had
        if (ev) ev->push_back({Event::LoopIterate, f.cur, loop});
        f.iteration++;
        f.cur = r->start;
        f.path.clear();
        if (exact) return take(exact);
        continue;
      }
      if (fixed >= 0 && f.iteration != fixed) return nullptr;
      if (ev) ev->push_back({Event::LoopExit, f.cur, loop, f.iteration});
      frames_.pop_back();
      continue;
    }
    return nullptr;
  }
}

std::string Cursor::near_miss(const OpDef* op, const Attrs& a, const Location& l, size_t arity) const {
  for (const Node* ch : frames_.back().cur->succ) {
    if (ch->kind != Node::OpCall || ch->op != op || ch->loc != l) continue;
    if (ch->sources.size() != arity)
      return "guard failed at node " + std::to_string(ch->id) + ": " + std::to_string(ch->sources.size()) +
             " inputs became " + std::to_string(arity);
    std::string guard;
    if (ch->attrs.varying(a, &guard) < 0) return "guard failed at node " + std::to_string(ch->id) + ": " + guard;
  }
  return "";
}

bool Cursor::can_finish() const {
  for (size_t i = frames_.size(); i-- > 0;) {
    const Frame& f = frames_[i];
    if (!f.cur->has_succ(f.region->end)) return false;
    if (f.region->owner && strict_) {
      int64_t fixed = fixed_trips(f.region->owner);
      if (fixed >= 0 && f.iteration != fixed) return false;
    }
  }
  return true;
}

void Cursor::finish(std::vector<Event>* ev) {
  while (frames_.size() > 1) {
    Frame& f = frames_.back();
    if (ev) ev->push_back({Event::LoopExit, f.cur, f.region->owner, f.iteration});
    frames_.pop_back();
  }
  if (ev) ev->push_back({Event::Edge, frames_[0].cur, frames_[0].region->end});
}

// ---------------------------------------------------------------- TraceGraph

TraceGraph::TraceGraph() : root_(std::make_unique<Region>()) {
  root_->start = new_node(root_.get(), Node::Start);
  root_->end = new_node(root_.get(), Node::End);
}

Node* TraceGraph::new_node(Region* r, Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  n->id = uint32_t(nodes_.size());
  n->region = r;
  nodes_.push_back(n.get());
  r->nodes.push_back(std::move(n));
  return nodes_.back();
}

void TraceGraph::link(Node* a, Node* b) {
  if (a->has_succ(b)) return;
  a->succ.push_back(b);
  b->pred.push_back(a);
}

bool TraceGraph::reaches(const Node* from, const Node* to) const {
  std::vector<const Node*> stack{from};
  std::unordered_set<const Node*> seen{from};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n == to) return true;
    for (const Node* s : n->succ)
      if (seen.insert(s).second) stack.push_back(s);
  }
  return false;
}

// Folds path[k..] of the top frame into a loop node, if that segment is a chain nothing else
// enters or leaves; leaves the cursor at the start of the loop's second iteration.
Node* TraceGraph::try_collapse_loop(Cursor& c, size_t k) {
  Cursor::Frame& f = c.frames_.back();
  Region* r = f.region;
  std::vector<Node*> seg(f.path.begin() + long(k), f.path.end());
  if (seg.empty() || seg.back() != f.cur) return nullptr;
  std::unordered_set<Node*> in(seg.begin(), seg.end());
  Node* first = seg.front();
  Node* last = seg.back();
  if (first->pred.size() != 1) return nullptr;
  Node* p = first->pred[0];
  if (in.count(p)) return nullptr;
  if (!last->succ.empty()) return nullptr;
  for (Node* n : seg) {
    for (Node* q : n->pred)
      if (n != first && !in.count(q)) return nullptr;
    for (Node* s : n->succ)
      if (!in.count(s)) return nullptr;
  }
  Node* loop = new_node(r, Node::Loop);
  loop->body = std::make_unique<Region>();
  Region* body = loop->body.get();
  body->owner = loop;
  body->start = new_node(body, Node::Start);
  body->end = new_node(body, Node::End);
  for (Node* n : seg) {
    auto it = std::find_if(r->nodes.begin(), r->nodes.end(), [&](auto& u) { return u.get() == n; });
    body->nodes.push_back(std::move(*it));
    r->nodes.erase(it);
    n->region = body;
  }
  std::replace(p->succ.begin(), p->succ.end(), first, loop);
  loop->pred = {p};
  first->pred = {body->start};
  body->start->succ = {first};
  last->succ = {body->end};
  body->end->pred = {last};
  f.path.resize(k);
  f.path.push_back(loop);
  f.cur = loop;
  c.frames_.push_back({body, body->start, 2, {}});
  c.exec_count_.resize(nodes_.size(), 0);
  return loop;
}

Node* TraceGraph::extend(Cursor& c, const Record& rec, bool& changed) {
  changed = true;
  // A call whose location is already on the current path (this region or an enclosing one)
  // closes a loop: the path from that node to here is one iteration.
  for (size_t fi = c.frames_.size(); fi-- > 0;) {
    auto& path = c.frames_[fi].path;
    size_t k = path.size();
    for (size_t i = 0; i < path.size(); ++i)
      if (path[i]->matches(rec.op, rec.attrs, rec.loc, rec.inputs.size())) {
        k = i;
        break;
      }
    if (k == path.size()) continue;
    while (c.frames_.size() > fi + 1) {  // leave inner loops: this call is past them
      Cursor::Frame& in = c.frames_.back();
      link(in.cur, in.region->end);
      in.region->owner->trip_counts.insert(in.iteration);
      c.frames_.pop_back();
    }
    if (try_collapse_loop(c, k)) {
      Node* n = c.match(rec.op, rec.attrs, rec.loc, rec.inputs.size(), nullptr);
      if (!n) throw std::runtime_error("[trace] internal: a collapsed loop does not accept its own head");
      return n;
    }
    break;
  }
  Cursor::Frame& f = c.frames_.back();
  Node* target = nullptr;
  for (auto& u : f.region->nodes)  // merge back into an existing node that is not an ancestor
    if (u->matches(rec.op, rec.attrs, rec.loc, rec.inputs.size()) && u.get() != f.cur && !reaches(u.get(), f.cur)) {
      target = u.get();
      break;
    }
  if (!target) {
    target = new_node(f.region, Node::OpCall);
    target->op = rec.op;
    target->attrs = rec.attrs;
    target->loc = rec.loc;
    target->sources.resize(rec.inputs.size());
    target->variables.resize(rec.inputs.size());
    target->num_outputs = uint32_t(rec.out_meta.size());
    target->fetched.assign(rec.out_meta.size(), false);
  }
  link(f.cur, target);
  f.cur = target;
  f.path.push_back(target);
  c.exec_count_.resize(nodes_.size(), 0);
  c.exec_count_[target->id]++;
  return target;
}

// Which storage and pending value `t` names, read while another thread may be installing its value.
static std::pair<const Storage*, const PendingValue*> value_refs(const TensorImpl& t) {
  auto g = lock_if_awaiting(t);
  return {t.storage.get(), t.pending.get()};
}

static bool same_view(const TensorImpl& a, const TensorImpl& b) {
  return value_refs(a) == value_refs(b) && a.offset == b.offset && a.dtype == b.dtype && a.shape == b.shape &&
         a.strides == b.strides;
}

ExternalRef external_ref(const std::shared_ptr<TensorImpl>& in, uint64_t step_first_id) {
  if (in->id < step_first_id) return {in, in->id};  // most inputs: one reference taken, no alias walk
  std::shared_ptr<TensorImpl> t = in;
  while (t->id >= step_first_id) {  // an alias made in the step stands for the tensor it aliases
    std::shared_ptr<TensorImpl> o = t->alias_of.lock();
    if (!o || !same_view(*t, *o)) break;
    t = std::move(o);
  }
  if (uint64_t id = t->id; id < step_first_id) return {std::move(t), id};
  if (!t->shape.empty() || t->requires_grad || t->grad_fn || !t->has_data()) return {std::move(t), kFreshKey};
  double v = 0;
  visit_dtype(t->dtype, [&](auto z) { v = double(*t->data_as<decltype(z)>()); });
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  uint64_t h = (bits * 0x9e3779b97f4a7c15ull) ^ (uint64_t(t->dtype) << 56) ^ (bits >> 29);
  return {t, h | (1ull << 63)};
}

// A private copy of a baked-in constant: the program may keep and change its own tensor later.
static std::shared_ptr<TensorImpl> constant_copy(const std::shared_ptr<TensorImpl>& t) {
  Tensor c = empty(t->shape, t->dtype);
  std::memcpy(c.impl()->data(), t->data(), itemsize(t->dtype));
  return c.impl_ptr();
}

Source to_source(const RecordSource& rs, const std::vector<uint32_t>& rec_node, const std::vector<uint32_t>& rec_exec,
                 const std::vector<uint32_t>& exec_count) {
  Source s;
  if (rs.external) {
    s.kind = rs.key == kFreshKey ? Source::External : Source::Variable;
    s.var_id = rs.key == kFreshKey ? 0 : rs.key;
    return s;
  }
  s.kind = Source::Op;
  s.node = rec_node[rs.rec];
  s.out = rs.out;
  s.age = exec_count[s.node] - 1 - rec_exec[rs.rec];
  return s;
}

bool add_source(Node& n, size_t input, const Source& s, const std::shared_ptr<TensorImpl>& var) {
  auto& set = n.sources[input];
  if (std::find(set.begin(), set.end(), s) != set.end()) return false;
  if (s.kind == Source::Op) {
    set.push_back(s);
    return true;
  }
  bool has_external = std::any_of(set.begin(), set.end(), [](auto& x) { return x.kind == Source::External; });
  if (has_external) return false;  // an external feed subsumes any particular tensor
  bool other_var = std::any_of(set.begin(), set.end(), [](auto& x) { return x.kind == Source::Variable; });
  if (s.kind == Source::Variable && !other_var) {
    set.push_back(s);
    n.variables[input] = is_constant_key(s.var_id) ? constant_copy(var) : var;
    return true;
  }
  // A different tensor each trace: host data, fed every step.
  std::erase_if(set, [](auto& x) { return x.kind == Source::Variable; });
  n.variables[input].reset();
  set.push_back(Source{Source::External});
  return true;
}

// Which producer in `set` a call's input source is, as the co-execution host picks it: the same
// op value or variable, else the set's feed (-1: none).
static int32_t pick_of(const std::vector<Source>& set, const Source& s) {
  for (size_t k = 0; k < set.size(); ++k)
    if (set[k] == s) return int32_t(k);
  if (s.kind != Source::Op)
    for (size_t k = 0; k < set.size(); ++k)
      if (set[k].kind == Source::External) return int32_t(k);
  return -1;
}

// Records what run `run` of node n took at input k: the producer's index in its set (after the
// record's sources were added), and the tensor from before the step it was (null: anything else).
// Both are guesses the graph predicts from; the host checks each call against them.
static void note_run_input(Node& n, size_t k, const Source& s, const RecordSource& rs, uint32_t run) {
  if (n.run_picks.size() < n.sources.size()) {
    n.run_picks.resize(n.sources.size());
    n.run_tensors.resize(n.sources.size());
  }
  auto& picks = n.run_picks[k];
  if (picks.size() <= run) picks.resize(size_t(run) + 1, -1);
  picks[run] = pick_of(n.sources[k], s);

  const bool pre_step = rs.external && rs.key != kFreshKey && !is_constant_key(rs.key);
  auto& tensors = n.run_tensors[k];
  if (tensors.size() <= run) {
    if (!pre_step || !rs.tensor) return;
    tensors.resize(size_t(run) + 1);
  }
  // A co-executed prefix of a fallback step records the key alone: the entry stays if it names it.
  std::shared_ptr<TensorImpl> t = rs.tensor ? rs.tensor : (tensors[run] && tensors[run]->id == rs.key ? tensors[run] : nullptr);
  tensors[run] = pre_step ? std::move(t) : nullptr;
}

bool TraceGraph::merge(const Trace& t, std::string* why, bool* only_generalized) {
  bool changed = empty(), structural = changed;
  // The message is built only for the first change: merge calls this per input of every record.
  auto note = [&](bool ch, auto&& what, bool generalizes = false) {
    if (ch && why && why->empty()) *why = what();
    changed |= ch;
    structural |= ch && !generalizes;
  };
  if (changed) note(true, [] { return std::string("first trace"); });
  Cursor c(*this, false);
  std::vector<uint32_t> rec_node(t.records.size()), rec_exec(t.records.size());
  std::vector<Cursor::Event> ev;
  auto note_exits = [&] {
    for (auto& e : ev)
      if (e.kind == Cursor::Event::LoopExit)
        note(const_cast<Node*>(e.to)->trip_counts.insert(e.iteration).second,
             [&] { return "new trip count " + std::to_string(e.iteration) + " of loop " + std::to_string(e.to->id); });
    ev.clear();
  };
  for (size_t i = 0; i < t.records.size(); ++i) {
    const Record& r = t.records[i];
    int64_t varied = 0;
    Node* n = c.match(r.op, r.attrs, r.loc, r.inputs.size(), &ev, &varied);
    note_exits();
    if (n && (varied & ~n->symbolic_attrs)) {
      n->symbolic_attrs |= varied;
      note(
          true,
          [&] {
            return "attributes of node " + std::to_string(n->id) + " vary (" + n->attrs.str() + " vs " +
                   r.attrs.str() + "): " + n->symbolic_str() + " taken per call";
          },
          true);
      // The other nodes of this call site (its paths, its loop iterations) take the same attributes
      // per call too: what varied at one of them will vary at the others, each a fallback otherwise.
      for (Node* m : nodes_)
        if (m != n && m->kind == Node::OpCall && m->op == n->op && m->loc == n->loc && m->attrs.varying(n->attrs) >= 0)
          m->symbolic_attrs |= varied;
    }
    if (!n) {
      bool ch = false;
      n = extend(c, r, ch);
      note(ch, [&] { return std::string("new call ") + r.op->name + " at record " + std::to_string(i); });
    }
    rec_node[i] = n->id;
    rec_exec[i] = c.exec_count()[n->id] - 1;
    if (n->run_attrs.size() <= rec_exec[i]) n->run_attrs.resize(size_t(rec_exec[i]) + 1);
    n->run_attrs[rec_exec[i]] = r.attrs;
    for (size_t k = 0; k < r.inputs.size(); ++k) {
      Source s = to_source(r.inputs[k], rec_node, rec_exec, c.exec_count());
      bool had = !n->sources[k].empty();
      bool added = add_source(*n, k, s, r.inputs[k].tensor);
      note_run_input(*n, k, s, r.inputs[k], rec_exec[i]);
      // An input that was one tensor and is now fed generalizes the node; a new producer does not.
      bool fed = had && n->sources[k].size() == 1 && n->sources[k][0].kind == Source::External;
      note(
          added,
          [&] {
            return "new source " + s.str() + " for input " + std::to_string(k) + " of node " + std::to_string(n->id);
          },
          fed);
    }
    for (size_t k = 0; k < r.fetched.size(); ++k)
      if (r.fetched[k] && !n->fetched[k]) {
        n->fetched[k] = true;
        note(true, [&] { return "new fetch point at node " + std::to_string(n->id); });
      }
  }
  // End of the step: close open loops and take an edge to end.
  while (c.frames_.size() > 1) {
    Cursor::Frame& f = c.frames_.back();
    if (!f.cur->has_succ(f.region->end)) {
      link(f.cur, f.region->end);
      note(true, [] { return std::string("new loop exit"); });
    }
    note(f.region->owner->trip_counts.insert(f.iteration).second, [] { return std::string("new trip count at step end"); });
    c.frames_.pop_back();
  }
  Cursor::Frame& f = c.frames_.back();
  if (!f.cur->has_succ(f.region->end)) {
    link(f.cur, f.region->end);
    note(true, [] { return std::string("new end of step"); });
  }
  if (only_generalized) *only_generalized = changed && !structural;
  return changed;
}

static void dot_region(std::ostringstream& os, const Region& r) {
  for (auto& n : r.nodes) {
    if (n->kind == Node::Loop) {
      os << "  subgraph cluster_" << n->id << " {\n  label=\"loop " << n->id << " trips {";
      bool first = true;
      for (auto t : n->trip_counts) {
        os << (first ? "" : ",") << t;
        first = false;
      }
      os << "}\";\n";
      dot_region(os, *n->body);
      os << "  }\n";
      os << "  n" << n->id << " [shape=doubleoctagon,label=\"loop " << n->id << "\"];\n";
      os << "  n" << n->id << " -> n" << n->body->start->id << " [style=dotted];\n";
    } else {
      std::string lbl = n->label();
      for (auto& ch : lbl)
        if (ch == '"') ch = '\'';
      bool fetch = std::find(n->fetched.begin(), n->fetched.end(), true) != n->fetched.end();
      bool feed = false;
      for (auto& set : n->sources)
        for (auto& s : set) feed |= s.kind == Source::External;
      std::string sym = n->symbolic_str();
      if (!sym.empty()) sym = " [symbolic: " + sym + "]";
      os << "  n" << n->id << " [label=\"" << n->id << ": " << lbl << sym << (feed ? " [feed]" : "")
         << (fetch ? " [fetch]" : "") << "\"" << (n->kind == Node::OpCall ? "" : ",shape=box") << "];\n";
    }
    for (Node* s : n->succ) os << "  n" << n->id << " -> n" << s->id << ";\n";
  }
}

std::string TraceGraph::dot() const {
  std::ostringstream os;
  os << "digraph TraceGraph {\n";
  dot_region(os, *root_);
  os << "}\n";
  return os.str();
}

}  // namespace terra::trace
