// Outputs of an op call that a graph mode records instead of running: shapes, strides and
// version counters exactly as eager would give them, values supplied later by `pending`.
#pragma once
#include <type_traits>
#include <memory>
#include <vector>

#include "terra/core/op.h"

namespace terra::runtime {

// A non-owning reference to a callable (no std::function: nothing to allocate or copy per op call).
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef>)
  FunctionRef(F&& f) : obj_(&f), call_([](void* o, A... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(a...); }) {}
  R operator()(A... a) const { return call_(obj_, a...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

// Views are taken on the (possibly placeholder) input's metadata; in-place ops return their
// target with its version bumped; other ops get fresh contiguous placeholders. `pending(k)`
// makes the pending value of output k.
TensorList placeholder_outputs(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                               TensorMetas& meta,
                               FunctionRef<std::shared_ptr<PendingValue>(uint32_t)> pending);

// Memory NumPy shares (Storage::foreign) is never held by a graph: an in-place write into it or a
// view of it runs at the call, on the host (the write reaches NumPy when eager's would; the view
// is a host tensor), and every op that reads it takes a copy of its value at the call
// (host_snapshot). True for such an op call, one of whose targets (in[0] for a view) needs_snapshot.
bool runs_on_host(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs);

}  // namespace terra::runtime
