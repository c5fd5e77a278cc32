// Outputs of an op call that a graph mode records instead of running: shapes, strides and
// version counters exactly as eager would give them, values supplied later by `pending`.
#pragma once
#include <type_traits>
#include <memory>
#include <vector>

#include "terra/core/object_pool.h"
#include "terra/core/op.h"
#include "terra/core/storage.h"
#include "terra/core/tensor.h"

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
// target with its version bumped; other ops get fresh contiguous placeholders.
// `pending(t, k, storage_too)` sets output k's pending value, and with storage_too its storage
// (a fresh output; a view keeps its base's): set_pending below makes both in one block.
TensorList placeholder_outputs(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                               const TensorMetas& meta, FunctionRef<void(TensorImpl&, uint32_t, bool)> pending);

// A placeholder's storage (no data: it carries the version counter) and its pending value in one
// pooled block: one allocation and one reference count per output instead of two of each. The
// pending value then lives as long as the storage (a view of the output keeps both), so its
// reference count no longer says how many tensors share the value.
template <class P>
struct PendingStorage final : Storage {
  template <class... A>
  explicit PendingStorage(A&&... a) : value(std::forward<A>(a)...) {}
  P value;
};

// Sets t.pending to a new P, and with storage_too t.storage to the block that holds it.
template <class P, class... A>
void set_pending(TensorImpl& t, bool storage_too, A&&... a) {
  if (!storage_too) {
    t.set_pending(make_pooled<P>(std::forward<A>(a)...));
    return;
  }
  auto block = make_pooled<PendingStorage<P>>(std::forward<A>(a)...);
  t.set_pending(std::shared_ptr<PendingValue>(block, &block->value));
  t.storage = std::move(block);
}

// Memory NumPy shares (Storage::foreign) is never held by a graph: an in-place write into it or a
// view of it runs at the call, on the host (the write reaches NumPy when eager's would; the view
// is a host tensor), and every op that reads it takes a copy of its value at the call
// (host_snapshot). True for such an op call, one of whose targets (in[0] for a view) needs_snapshot.
bool runs_on_host_check(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs);
// Inline: nearly every call is neither a view nor an in-place write, and is asked on every op.
inline bool runs_on_host(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs) {
  return (op.has(kView) || op.has(kInplace)) && runs_on_host_check(op, in, attrs);
}

}  // namespace terra::runtime
