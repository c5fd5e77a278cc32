#include <atomic>
#include <span>
#include <stdexcept>
#include <string>

#include "terra/autograd/grad_mode.h"
#include "terra/autograd/node.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/creation.h"

namespace terra::autograd {

SavedTensor SavedTensor::save(const Tensor& t) { return {t.detach(), t.impl()->storage->version.load()}; }

Tensor SavedTensor::unpack(const char* op) const {
  if (!value.defined()) return value;
  uint64_t now = value.impl()->storage->version.load();
  if (now != version)
    throw std::invalid_argument(std::string("[backward] a tensor of shape ") + shape_str(value.shape()) +
                                " saved by " + op + " was modified in place after it was saved (version " +
                                std::to_string(now) + ", saved at " + std::to_string(version) + ")");
  return value;
}

Node::~Node() {
  thread_local std::vector<std::shared_ptr<Node>> orphans;
  thread_local bool draining = false;
  for (auto& e : next)
    if (e.node && e.node.use_count() == 1) orphans.push_back(std::move(e.node));
  if (draining) return;
  draining = true;
  while (!orphans.empty()) {
    auto n = std::move(orphans.back());
    orphans.pop_back();
    n.reset();  // its destructor appends its own orphans instead of recursing
  }
  draining = false;
}

static void accumulate_leaf(TensorImpl& leaf, const Tensor& g) {
  if (!leaf.grad) {
    // torch's layout contract: a contiguous leaf gets a contiguous grad (Linear's weight grad
    // arrives as a transposed view), so the optimizer's elementwise ops run dense loops.
    bool dense_leaf = leaf.is_contiguous();
    leaf.grad = (dense_leaf && !g.is_contiguous() ? g.contiguous() : g.detach()).impl_ptr();
  } else {
    leaf.grad = add(Tensor(leaf.grad), g).impl_ptr();
  }
}

// A number per backward pass: a node whose bw_pass differs has not been reached by this pass yet.
static uint64_t next_pass() {
  static std::atomic<uint64_t> passes{0};
  return passes.fetch_add(1, std::memory_order_relaxed) + 1;
}

void run_backward(const Tensor& root, const Tensor& gradient) {
  if (!root.defined()) throw std::invalid_argument("[backward] called on an undefined tensor");
  if (!root.requires_grad())
    throw std::invalid_argument("[backward] tensor of shape " + shape_str(root.shape()) +
                                " does not require grad and has no grad_fn");
  Tensor g = gradient;
  if (!g.defined()) {
    if (root.numel() != 1)
      throw std::invalid_argument("[backward] a gradient can be implicitly created only for a scalar output; got shape " +
                                  shape_str(root.shape()));
    g = ones(root.shape(), root.dtype());
  } else if (g.shape() != root.shape()) {
    throw std::invalid_argument("[backward] gradient of shape " + shape_str(g.shape()) +
                                " does not match the tensor's shape " + shape_str(root.shape()));
  }
  NoGradGuard no_grad;
  TensorImpl* r = root.impl();
  if (!r->grad_fn) {
    accumulate_leaf(*r, g);
    return;
  }

  // Count, for each reachable node, how many edges point to it (iterative DFS). The counts and
  // the gradient slots live in the nodes and one flat list, not in hash maps: a map entry per
  // node was two mallocs per op of every backward pass.
  const uint64_t pass = next_pass();
  std::vector<Tensor> grads;  // node n's output gradients: grads[n->bw_first, + out_meta.size())
  auto visit = [&](Node* n) {
    n->bw_pass = pass;
    n->bw_deps = 0;
    n->bw_first = uint32_t(grads.size());
    grads.resize(grads.size() + n->out_meta.size());
  };
  Node* top = r->grad_fn.get();
  std::vector<Node*> stack{top};
  visit(top);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& e : n->next) {
      if (!e.node) continue;
      Node* m = e.node.get();
      if (m->bw_pass != pass) {
        visit(m);
        stack.push_back(m);
      }
      m->bw_deps++;
    }
  }

  grads[top->bw_first + r->output_nr] = g;
  std::vector<Node*>& ready = stack;  // empty again
  ready.push_back(top);
  std::vector<Tensor> in, out;  // one node's saved tensors (capacity kept from node to node)
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    if (n->released)
      throw std::invalid_argument(std::string("[backward] trying to backward through the graph a second time (") +
                                  n->op->name + "'s saved tensors were already freed)");
    std::span<Tensor> gout(grads.data() + n->bw_first, n->out_meta.size());
    in.resize(n->saved_in.size());
    out.resize(n->saved_out.size());
    for (size_t k = 0; k < in.size(); ++k) in[k] = n->saved_in[k].unpack(n->op->name);
    for (size_t k = 0; k < out.size(); ++k) out[k] = n->saved_out[k].unpack(n->op->name);
    bool any = false;
    for (auto& t : gout) any |= t.defined();
    TensorList gin;
    if (any) {
      GradArgs args{in, out, gout, n->in_meta, n->attrs, n->rng};
      gin = n->op->grad(args);
    }
    for (auto& t : gout) t = Tensor();  // this node's gradients are used: free them now
    in.clear();
    out.clear();
    n->saved_in.clear();
    n->saved_out.clear();
    n->released = true;
    for (size_t k = 0; k < n->next.size(); ++k) {
      Edge& e = n->next[k];
      Tensor gk = k < gin.size() ? gin[k] : Tensor();
      if (gk.defined() && gk.shape() != n->in_meta[k].shape)
        throw std::runtime_error(std::string("[backward] internal: gradient of ") + n->op->name + " input " +
                                 std::to_string(k) + " has shape " + shape_str(gk.shape()) + ", expected " +
                                 shape_str(n->in_meta[k].shape));
      if (e.leaf) {
        if (gk.defined()) accumulate_leaf(*e.leaf, gk);
        continue;
      }
      if (!e.node) continue;
      Node* m = e.node.get();
      if (gk.defined()) {
        Tensor& acc = grads[m->bw_first + e.output_nr];
        acc = acc.defined() ? add(acc, gk) : gk;
      }
      if (--m->bw_deps == 0) ready.push_back(m);
    }
  }
}

}  // namespace terra::autograd
