#include "terra/runtime/placeholder.h"

namespace terra::runtime {

std::vector<Tensor> placeholder_outputs(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                                        std::vector<TensorMeta>& meta,
                                        FunctionRef<std::shared_ptr<PendingValue>(uint32_t)> pending) {
  std::vector<Tensor> out;
  if (op.has(kView)) {
    out.push_back(op.view(in[0], attrs));
    out[0].impl()->pending = pending(0);
  } else if (op.has(kInplace)) {
    out.push_back(in[0]);
    in[0].impl()->storage->version.fetch_add(1);
    // The write is owed from here on: the host bytes are not this value until the graph runs it.
    // Set only where a write is really deferred (not where a graph mode ran the op at once), so a
    // NumPy-shared storage written eagerly between steps is still copied when a step reads it.
    in[0].impl()->storage->deferred_write.store(true);
  } else {
    out.reserve(meta.size());
    for (uint32_t k = 0; k < meta.size(); ++k) {
      auto t = std::make_shared<TensorImpl>();
      t->numel = numel_of(meta[k].shape);
      t->shape = std::move(meta[k].shape);
      t->strides = contiguous_strides(t->shape);
      t->dtype = meta[k].dtype;
      t->storage = std::make_shared<Storage>();  // no data: carries the version counter
      t->pending = pending(k);
      out.emplace_back(std::move(t));
    }
  }
  return out;
}

bool runs_on_host(const OpDef& op, std::span<const Tensor> in) {
  return (op.has(kInplace) || op.has(kView)) && !in.empty() && needs_snapshot(*in[0].impl());
}

}  // namespace terra::runtime
