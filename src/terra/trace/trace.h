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

// Identity of an external input for matching, and the tensor the graph may keep for it:
// - a 0-d host value made inside the step (a literal such as the 0.5 in `x * 0.5`) is keyed by its
//   dtype and value, so the graph can bake it in as a constant (as LazyTensor does);
// - a detached alias made inside the step (autograd saves its inputs that way) is the tensor it
//   aliases: a parameter's alias is the parameter, the same every step;
// - any other tensor made inside the step (host data) is fresh: no later step can pass the same
//   tensor, so it is fed at once (Input Feeding) instead of after a second trace;
// - a tensor from before the step is keyed by its identity.
struct ExternalRef {
  std::shared_ptr<TensorImpl> tensor;
  uint64_t key = 0;
};
ExternalRef external_ref(const std::shared_ptr<TensorImpl>& t, uint64_t step_first_id);
// The key alone: no reference taken for the common case (a tensor from before the step).
inline uint64_t external_key(const std::shared_ptr<TensorImpl>& t, uint64_t step_first_id) {
  return t->id < step_first_id ? t->id : external_ref(t, step_first_id).key;
}
inline bool is_constant_key(uint64_t key) { return key >> 63; }
constexpr uint64_t kFreshKey = 1ull << 62;  // tensor ids never get here

struct Record {
  const OpDef* op = nullptr;
  Attrs attrs;
  Location loc;
  std::vector<RecordSource> inputs;
  TensorMetas out_meta;
  std::vector<bool> fetched;  // per output: the host read this value (a fetch point)
};

struct Trace {
  std::vector<Record> records;
};

}  // namespace terra::trace
