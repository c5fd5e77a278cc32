// A step's slots come from a pool of chunks that ended steps hand back (runtime/channel.cpp): a
// reused slot must start as a new one would. A stale state, value, error or reference would hand
// the next step another step's outputs (a silent wrong value) or its error.
#include <gtest/gtest.h>

#include <stdexcept>

#include "terra/runtime/channel.h"
#include "terra/terra.h"

namespace terra {
namespace {

using runtime::CellSlot;
using runtime::StepState;

TEST(StepSlots, ASlotReusedFromAnEndedStepStartsEmpty) {
  constexpr uint64_t kPositions = 600;  // several chunks
  for (int step = 0; step < 4; ++step) {
    auto st = std::make_shared<StepState>();
    for (uint64_t p = 0; p < kPositions; ++p) {
      bool ready = false;  // host_cell sets it only for a position the runner stored first
      CellSlot* s = st->host_cell(p, &ready);
      // Whatever an earlier step left in this memory, the position is untouched in this one.
      ASSERT_FALSE(ready) << "step " << step << " position " << p;
      ASSERT_TRUE(s->cell.values.empty()) << "step " << step << " position " << p;
      ASSERT_FALSE(s->cell.error) << "step " << step << " position " << p;
      ASSERT_EQ(s->refs.load(), 1u);  // the caller's own reference only
      // Leave every kind of state behind for the next step to inherit: values, a live reference,
      // the runner's store, and (from position 500 on) an error.
      st->runner_store(p, {full({1}, float(step * 1000 + p))});
      ASSERT_EQ(s->cell.values.at(0).item<float>(), float(step * 1000 + p));
    }
    st->runner_fail(500, std::make_exception_ptr(std::runtime_error("step failed")));
  }
  // Positions the runner reached first: the next step sees no value until its own store.
  auto st = std::make_shared<StepState>();
  for (uint64_t p = 0; p < kPositions; ++p) {
    st->runner_store(p, {full({1}, 7.0f)});
    bool ready = false;
    CellSlot* s = st->host_cell(p, &ready);
    EXPECT_TRUE(ready);
    EXPECT_FALSE(s->cell.error);
    EXPECT_EQ(s->cell.values.at(0).item<float>(), 7.0f);
    st->host_release(*s);
  }
}

}  // namespace
}  // namespace terra
