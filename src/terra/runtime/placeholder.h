// Outputs of an op call that a graph mode records instead of running: shapes, strides and
// version counters exactly as eager would give them, values supplied later by `pending`.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "terra/core/op.h"

namespace terra::runtime {

// Views are taken on the (possibly placeholder) input's metadata; in-place ops return their
// target with its version bumped; other ops get fresh contiguous placeholders. `pending(k)`
// makes the pending value of output k.
std::vector<Tensor> placeholder_outputs(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                                        std::vector<TensorMeta>& meta,
                                        const std::function<std::shared_ptr<PendingValue>(uint32_t)>& pending);

}  // namespace terra::runtime
