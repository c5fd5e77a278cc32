// One recorded op call in the autograd graph: what to differentiate and where gradients go.
#pragma once
#include <memory>
#include <vector>

#include "terra/core/op.h"

namespace terra::autograd {

struct Node;

// Where the gradient of one input goes: an earlier node's output, or a leaf's .grad.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t output_nr = 0;
  std::shared_ptr<TensorImpl> leaf;
  bool valid() const { return node || leaf; }
};

// A tensor kept for the gradient, with the version it had, so in-place overwrites are caught.
struct SavedTensor {
  Tensor value;
  uint64_t version = 0;
  static SavedTensor save(const Tensor& t);
  Tensor unpack(const char* op) const;  // throws if overwritten in place since saved
};

struct Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  PhiloxKey rng;
  std::vector<Edge> next;  // one per input
  TensorMetas in_meta;
  TensorMetas out_meta;
  std::vector<SavedTensor> saved_in, saved_out;
  bool released = false;  // saved tensors freed after a backward pass
  // run_backward's bookkeeping for the pass numbered bw_pass: edges still to deliver a gradient,
  // and where this node's output gradients start in the pass's list.
  uint64_t bw_pass = 0;
  int64_t bw_deps = 0;
  uint32_t bw_first = 0;
  ~Node();                // iterative, so a long chain does not overflow the stack
};

// Runs reverse mode from `root`. Gradient ops go through the dispatcher like any other op.
void run_backward(const Tensor& root, const Tensor& gradient);

}  // namespace terra::autograd
