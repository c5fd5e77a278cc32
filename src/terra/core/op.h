// The one definition of an op: name, flags, shape/dtype inference, kernel (or view), gradient.
// Every mode uses the same definition; only what the dispatcher does with it differs.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "terra/core/attrs.h"
#include "terra/core/object_pool.h"
#include "terra/core/tensor.h"

namespace terra {

struct TensorMeta {
  Shape shape;
  DType dtype;
};
// Every op call infers one (in the skeleton and on the runner too): pooled, so the call never
// reaches malloc for it (a malloc/free pair cost ~200 instructions of an op's ~2400 in eager).
using TensorMetas = std::vector<TensorMeta, PoolAllocator<TensorMeta>>;
// Whether `in` has exactly the shapes and dtypes `m` holds: the key of a kept inference (the
// runner's per-node cache, the co-executing host's known calls). Inline: no memcmp call per input.
inline bool metas_match(const TensorMetas& m, std::span<const Tensor> in) {
  if (m.size() != in.size()) return false;
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorImpl& t = *in[i].impl();
    const size_t r = t.shape.size();
    if (t.dtype != m[i].dtype || r != m[i].shape.size()) return false;
    const int64_t *a = t.shape.data(), *b = m[i].shape.data();
    for (size_t d = 0; d < r; ++d)
      if (a[d] != b[d]) return false;
  }
  return true;
}
// Sets `m` to the shapes and dtypes of `in` (keeping its capacity).
inline void record_metas(TensorMetas& m, std::span<const Tensor> in) {
  m.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) m[i] = {in[i].impl()->shape, in[i].impl()->dtype};
}
// An op call's outputs as executors return them, pooled for the same reason.
using TensorList = std::vector<Tensor, PoolAllocator<Tensor>>;

// Counter-based random stream of one op call: replaying the call with the same key draws the same
// numbers, which is what lets fallback re-execute random ops bit-exactly.
struct PhiloxKey {
  uint64_t seed = 0;
  uint64_t offset = 0;
  bool operator==(const PhiloxKey&) const = default;
};

struct KernelArgs {
  std::span<const Tensor> in;
  std::span<Tensor> out;  // allocated contiguous by the dispatcher (in-place ops: out[0] is in[0])
  const Attrs& attrs;
  PhiloxKey rng;
};

// One slice of a fused tile in float32 (OpDef::tile_f32): in[k] advances with the element when
// step[k] is 1 and stays on one value (a broadcast scalar) when it is 0; out may alias an input.
struct TileArgs {
  const float* in[2] = {nullptr, nullptr};
  int64_t step[2] = {1, 1};
  float* out = nullptr;
  int64_t n = 0;
};

struct GradArgs {
  std::span<const Tensor> in;        // saved inputs (undefined when the op does not save them)
  std::span<const Tensor> out;       // saved outputs (same)
  std::span<const Tensor> grad_out;  // one per output; undefined where no gradient flowed
  std::span<const TensorMeta> in_meta;
  const Attrs& attrs;
  PhiloxKey rng;
};

enum OpFlags : uint32_t {
  kElementwise = 1u << 0,
  kRandom = 1u << 1,      // draws numbers: the dispatcher hands it a PhiloxKey
  kStateful = 1u << 2,    // effects outside tensors: never put in a graph
  kView = 1u << 3,        // output shares the input's storage
  kInplace = 1u << 4,     // writes into input 0 (inputs [0, targets) with OpDef::targets) and returns it
  kSaveInputs = 1u << 5,  // autograd keeps the inputs for the gradient
  kSaveOutputs = 1u << 6, // autograd keeps the outputs for the gradient
  kNoGrad = 1u << 7,      // integer/boolean results, never differentiable
};

struct OpDef {
  using InferFn = TensorMetas (*)(std::span<const Tensor> in, const Attrs& attrs);
  using KernelFn = void (*)(const KernelArgs& args);
  using ViewFn = Tensor (*)(const Tensor& in, const Attrs& attrs);
  using GradFn = TensorList (*)(const GradArgs& args);
  // Raises the kernel's own value-dependent error (index out of range, integer division by zero)
  // before the call is handed on, so graph modes raise it at the call site as eager does.
  using CheckValuesFn = void (*)(std::span<const Tensor> in, const Attrs& attrs);
  // Rough work of one call in multiply-adds (the GraphRunner sizes ops it runs side by side).
  using WorkFn = int64_t (*)(std::span<const Tensor> in, std::span<const TensorMeta> out, const Attrs& attrs);
  // kInplace ops that update several tensors in one call (an optimizer over all parameters): how
  // many leading inputs it writes, each returned as the output of the same index.
  using TargetsFn = uint32_t (*)(const Attrs& attrs);
  using TileFn = void (*)(const TileArgs& args);

  const char* name;
  uint32_t flags = 0;
  InferFn infer = nullptr;
  KernelFn kernel = nullptr;  // computing ops
  ViewFn view = nullptr;      // kView ops
  GradFn grad = nullptr;      // null: not differentiable
  // Called by dispatch() only when every input in `check_inputs` (bit k: input k) has its current
  // value on the host; otherwise the kernel raises the same error where it runs.
  CheckValuesFn check_values = nullptr;
  uint32_t check_inputs = 0;
  // With kSaveInputs / kSaveOutputs: bit k set = input (output) k is not kept, its gradient needs
  // only its meta (a fused op's bias, its loss value), so in-place writes to it stay legal.
  uint32_t unsaved_in = 0;
  uint32_t unsaved_out = 0;
  // Set on ops whose work grows faster than their outputs (products, convolutions); other ops
  // count as a few multiply-adds per output element (op_work).
  WorkFn work = nullptr;
  TargetsFn targets = nullptr;  // kInplace: null = 1 (input 0)
  // Elementwise ops without attributes: the kernel's own element function over a float32 slice,
  // so a fused group (compile/fused_elementwise.cpp) runs it per tile without a kernel call.
  TileFn tile_f32 = nullptr;

  bool has(OpFlags f) const { return (flags & f) != 0; }
};

// The inputs an op call writes in place (the first ones): 0 unless kInplace.
inline uint32_t inplace_targets(const OpDef& op, const Attrs& attrs) {
  return !op.has(kInplace) ? 0 : op.targets ? op.targets(attrs) : 1;
}

// The op's work for these inputs and outputs, in multiply-adds: `work` where set, else
// kElementWork per output element.
constexpr int64_t kElementWork = 4;
int64_t op_work(const OpDef& op, std::span<const Tensor> in, std::span<const TensorMeta> out, const Attrs& attrs);

// Every OpDef registers itself (for listing in tests, tools and the graph dump).
const std::vector<const OpDef*>& all_ops();
const OpDef* find_op(const char* name);
struct OpRegistrar {
  explicit OpRegistrar(const OpDef& op);
};

}  // namespace terra
