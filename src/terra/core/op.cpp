#include "terra/core/op.h"

#include <cstring>

namespace terra {

static std::vector<const OpDef*>& registry() {
  static std::vector<const OpDef*> r;
  return r;
}
const std::vector<const OpDef*>& all_ops() { return registry(); }
const OpDef* find_op(const char* name) {
  for (const OpDef* op : registry())
    if (std::strcmp(op->name, name) == 0) return op;
  return nullptr;
}
OpRegistrar::OpRegistrar(const OpDef& op) { registry().push_back(&op); }

int64_t op_work(const OpDef& op, std::span<const Tensor> in, std::span<const TensorMeta> out, const Attrs& attrs) {
  if (op.work) return op.work(in, out, attrs);
  int64_t n = 0;
  for (const TensorMeta& m : out) n += numel_of(m.shape);
  return kElementWork * n;
}

}  // namespace terra
