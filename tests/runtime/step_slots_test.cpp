// A step's slots come from a pool of chunks that ended steps hand back (runtime/channel.cpp): a
// reused slot must start as a new one would. A stale state, value, error or reference would hand
// the next step another step's outputs (a silent wrong value) or its error.
#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <vector>

#include "terra/runtime/channel.h"
#include "terra/terra.h"

namespace terra {
namespace {

using runtime::CellSlot;
using runtime::RingDrop;
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

// Past the inline page (16 chunks) the slot directory grows pages of 32, 64, ... chunks. Every
// position keeps its own slot, and an error reaches the cells the host makes after the failure.
TEST(StepSlots, PositionsPastTheInlinePageGetSlotsOfTheirOwn) {
  constexpr uint64_t kPositions = 70000;  // 274 chunks: pages 0 to 4
  auto st = std::make_shared<StepState>();
  std::vector<CellSlot*> slots;
  for (uint64_t p = 0; p < kPositions; ++p) {
    bool ready = false;
    if (p % 2) st->runner_store(p, {full({1}, float(p))});  // the runner first on odd positions
    slots.push_back(st->host_cell(p, &ready));
    ASSERT_EQ(ready, p % 2 == 1) << p;
    if (p % 2 == 0) st->runner_store(p, {full({1}, float(p))});
  }
  for (uint64_t p = 0; p < kPositions; p += 997) ASSERT_EQ(slots[p]->cell.values.at(0).item<float>(), float(p)) << p;
  st->runner_fail(kPositions, std::make_exception_ptr(std::runtime_error("step failed")));
  CellSlot* late = st->host_cell(kPositions + 300);  // a chunk made after the failure
  EXPECT_TRUE(late->cell.error);
  EXPECT_FALSE(slots[kPositions - 1]->cell.error);  // before the failed op: its value stands
}

// The host makes cells while the runner stores, both growing the directory: each cell ends with
// its own position's value, whichever thread got there first (ThreadSanitizer checks the rest).
TEST(StepSlots, HostAndRunnerMeetOnEverySlotConcurrently) {
  constexpr uint64_t kPositions = 20000;
  for (int round = 0; round < 3; ++round) {
    auto st = std::make_shared<StepState>();
    std::vector<CellSlot*> slots(kPositions);
    std::vector<char> ready(kPositions);
    std::thread runner([&] {
      for (uint64_t p = 0; p < kPositions; ++p) st->runner_store(p, {full({1}, float(p))});
    });
    for (uint64_t p = 0; p < kPositions; ++p) {
      bool r = false;
      slots[p] = st->host_cell(p, &r);
      ready[p] = r;
      if (r) ASSERT_EQ(slots[p]->cell.values.at(0).item<float>(), float(p)) << p;
    }
    runner.join();
    for (uint64_t p = 0; p < kPositions; ++p) ASSERT_EQ(slots[p]->cell.values.at(0).item<float>(), float(p)) << p;
  }
}

// The host thread hands its dead slots and ring drops to the runner in batches; a placeholder
// dropped on another thread (the runner dropping a fed value, a Python thread) goes at once.
TEST(StepSlots, DropsReachTheRunnerInBatchesFromTheHostAndAtOnceFromOtherThreads) {
  auto st = std::make_shared<StepState>();
  auto make = [&](uint64_t p) {
    CellSlot* s = st->host_cell(p);
    s->tracked = true;
    st->runner_store(p, {full({1}, float(p))});
    return s;
  };
  CellSlot* a = make(0);
  st->host_release(*a);  // the host thread: batched
  std::vector<RingDrop> drops;
  st->runner_take_ring_drops(drops);
  EXPECT_TRUE(drops.empty());
  st->runner_store(1, {full({1}, 1.0f)});
  EXPECT_FALSE(a->cell.values.empty());  // the runner has not been told yet
  st->flush_host_drops();
  EXPECT_TRUE(st->has_ring_drops());
  st->runner_take_ring_drops(drops);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].pos, 0u);
  st->runner_store(2, {full({1}, 2.0f)});
  EXPECT_TRUE(a->cell.values.empty());  // freed by the runner at its next store

  // A full batch goes without a flush.
  std::vector<CellSlot*> batch;
  for (uint64_t p = 10; p < 10 + StepState::kHostBatch; ++p) batch.push_back(make(p));
  for (CellSlot* s : batch) st->host_release(*s);
  drops.clear();
  st->runner_take_ring_drops(drops);
  EXPECT_EQ(drops.size(), StepState::kHostBatch);

  CellSlot* b = make(100);
  std::thread([&] { st->host_release(*b); }).join();
  drops.clear();
  st->runner_take_ring_drops(drops);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].pos, 100u);
  st->runner_store(101, {full({1}, 1.0f)});
  EXPECT_TRUE(b->cell.values.empty());
}

}  // namespace
}  // namespace terra
