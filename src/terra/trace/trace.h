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
};

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
