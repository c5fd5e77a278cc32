// One step's trace: every op call in order with its op, attributes, location and input sources.
#pragma once
#include <memory>
#include <vector>

#include "terra/core/op.h"
#include "terra/trace/location.h"

namespace terra::trace {

// Where an input came from: an earlier record of the same trace, or outside the step
// (host data, a parameter, optimizer state, a tensor kept from an earlier step).
struct RecordSource {
  bool external = false;
  uint32_t rec = 0, out = 0;              // when !external
  std::shared_ptr<TensorImpl> tensor;     // when external: the tensor passed in
  uint64_t key = 0;                       // when external: external_key() of it
};

// Identity of an external input for matching. A 0-d host value made inside the step (a literal
// such as the 0.5 in `x * 0.5`) is keyed by its dtype and value, so the graph can bake it in as a
// constant (as LazyTensor does); any other tensor is keyed by its identity.
uint64_t external_key(TensorImpl& t, uint64_t step_first_id);
inline bool is_constant_key(uint64_t key) { return key >> 63; }

struct Record {
  const OpDef* op = nullptr;
  Attrs attrs;
  Location loc;
  std::vector<RecordSource> inputs;
  std::vector<TensorMeta> out_meta;
  std::vector<bool> fetched;  // per output: the host read this value (a fetch point)
};

struct Trace {
  std::vector<Record> records;
};

}  // namespace terra::trace
