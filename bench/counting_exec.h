// An Executor that counts dispatcher calls while running them eagerly: the benchmarks count the
// ops of one step with it (forward, backward and optimizer) to report costs per op.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include <terra/core/dispatch.h>
#include <terra/terra.h>

namespace terra::bench {

class CountingExec : public Executor {
 public:
  TensorList run(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                 const TensorMetas& meta, PhiloxKey rng) override {
    ++calls;
    return execute_eager(op, in, attrs, meta, rng);
  }
  int64_t calls = 0;
};

}  // namespace terra::bench
