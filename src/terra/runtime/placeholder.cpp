#include "terra/runtime/placeholder.h"

namespace terra::runtime {

std::vector<Tensor> placeholder_outputs(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                                        std::vector<TensorMeta>& meta,
                                        const std::function<std::shared_ptr<PendingValue>(uint32_t)>& pending) {
  std::vector<Tensor> out;
  if (op.has(kView)) {
    out.push_back(op.view(in[0], attrs));
    out[0].impl()->pending = pending(0);
  } else if (op.has(kInplace)) {
    out.push_back(in[0]);
    in[0].impl()->storage->version.fetch_add(1);
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

}  // namespace terra::runtime
