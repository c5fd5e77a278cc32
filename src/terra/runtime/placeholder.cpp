#include "terra/runtime/placeholder.h"

#include "terra/core/object_pool.h"

namespace terra::runtime {

TensorList placeholder_outputs(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                               const TensorMetas& meta, FunctionRef<void(TensorImpl&, uint32_t, bool)> pending) {
  TensorList out;
  if (op.has(kView)) {
    out.push_back(op.view(in[0], attrs));
    pending(*out[0].impl(), 0, false);
  } else if (op.has(kInplace)) {
    const uint32_t n = inplace_targets(op, attrs);
    out.assign(in.begin(), in.begin() + n);
    for (uint32_t k = 0; k < n; ++k) {
      auto g = lock_if_awaiting(*in[k].impl());  // a placeholder another thread may be reading first
      in[k].impl()->storage->version.fetch_add(1);
      // The write is owed from here on: the host bytes are not this value until the graph runs it.
      // Set only where a write is really deferred (not where a graph mode ran the op at once), so a
      // NumPy-shared storage written eagerly between steps is still copied when a step reads it.
      in[k].impl()->storage->deferred_write.store(true);
    }
  } else {
    out.reserve(meta.size());
    for (uint32_t k = 0; k < meta.size(); ++k) {
      auto t = make_pooled<TensorImpl>();
      t->shape = meta[k].shape;
      t->numel = contiguous_layout(t->shape, t->strides);
      t->dtype = meta[k].dtype;
      pending(*t, k, true);
      out.emplace_back(std::move(t));
    }
  }
  return out;
}

bool runs_on_host_check(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs) {
  if (op.has(kView)) return !in.empty() && needs_snapshot(*in[0].impl());
  const uint32_t n = inplace_targets(op, attrs);
  for (uint32_t k = 0; k < n && k < in.size(); ++k)
    if (needs_snapshot(*in[k].impl())) return true;
  return false;
}

}  // namespace terra::runtime
