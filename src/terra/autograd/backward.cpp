#include <stdexcept>
#include <string>
#include <unordered_map>

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

  // Count, for each reachable node, how many edges point to it (iterative DFS).
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{r->grad_fn.get()};
  deps[r->grad_fn.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& e : n->next) {
      if (!e.node) continue;
      auto [it, fresh] = deps.try_emplace(e.node.get(), 0);
      it->second++;
      if (fresh) stack.push_back(e.node.get());
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> grads;
  grads[r->grad_fn.get()].resize(r->grad_fn->out_meta.size());
  grads[r->grad_fn.get()][r->output_nr] = g;
  std::vector<Node*> ready{r->grad_fn.get()};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    if (n->released)
      throw std::invalid_argument(std::string("[backward] trying to backward through the graph a second time (") +
                                  n->op->name + "'s saved tensors were already freed)");
    std::vector<Tensor> gout = std::move(grads[n]);
    grads.erase(n);
    gout.resize(n->out_meta.size());
    std::vector<Tensor> in(n->saved_in.size()), out(n->saved_out.size());
    for (size_t k = 0; k < in.size(); ++k) in[k] = n->saved_in[k].unpack(n->op->name);
    for (size_t k = 0; k < out.size(); ++k) out[k] = n->saved_out[k].unpack(n->op->name);
    bool any = false;
    for (auto& t : gout) any |= t.defined();
    std::vector<Tensor> gin;
    if (any) {
      GradArgs args{in, out, gout, n->in_meta, n->attrs, n->rng};
      gin = n->op->grad(args);
    }
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
      if (gk.defined()) {
        auto& slot = grads[e.node.get()];
        slot.resize(e.node->out_meta.size());
        Tensor& acc = slot[e.output_nr];
        acc = acc.defined() ? add(acc, gk) : gk;
      }
      if (--deps[e.node.get()] == 0) ready.push_back(e.node.get());
    }
  }
}

}  // namespace terra::autograd
