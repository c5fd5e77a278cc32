// A step's slots come from a pool of chunks that ended steps hand back (runtime/channel.cpp): a
// reused slot must start as a new one would. A stale state, value, error or reference would hand
// the next step another step's outputs (a silent wrong value) or its error. The host's records
// and the runner's values live apart (CellSlot, SlotValues): the runner stores without looking at
// the host's record, and learns of dead placeholders from the host's drops.
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

// What GraphRunner::advance does after an op's store: `done` passes the position (release).
void runner_finish(StepState& st, uint64_t p, std::vector<Tensor> outs) {
  st.runner_store(p, outs);
  st.done.store(p + 1, std::memory_order_release);
}

TEST(StepSlots, ASlotReusedFromAnEndedStepStartsEmpty) {
  constexpr uint64_t kPositions = 600;  // several chunks
  for (int step = 0; step < 6; ++step) {
    auto st = std::make_shared<StepState>();
    for (uint64_t p = 0; p < kPositions; ++p) {
      bool ready = false;  // host_cell sets it only for a position the runner finished first
      CellSlot* s = st->host_cell(p, &ready);
      // Whatever an earlier step left in this memory, the position is untouched in this one.
      ASSERT_FALSE(ready) << "step " << step << " position " << p;
      ASSERT_TRUE(s->vals->cell.values.empty()) << "step " << step << " position " << p;
      ASSERT_FALSE(st->error_at(p)) << "step " << step << " position " << p;
      ASSERT_EQ(s->refs.load(), 1u);  // the caller's own reference only
      // Leave every kind of state behind for the next step to inherit: values, a live reference,
      // the runner's store, a dead position or output before the store (on positions that move
      // from step to step: a stale mark would drop a live value, or keep a dead one), and (from
      // position 500 on) an error.
      const uint64_t kind = (p + uint64_t(step)) % 3;
      if (kind == 1) {
        s->refs.fetch_add(1);  // a second placeholder, then one of the two dies
        st->host_release_out(*s, 1);
      } else if (kind == 2) {
        st->host_release(*s);  // the only one: the position dies
      }
      st->flush_host_drops();
      st->runner_store(p, {full({1}, float(step * 1000 + p)), full({1}, 0.0f)});
      if (kind == 2) {
        ASSERT_TRUE(s->vals->cell.values.empty()) << "step " << step << " position " << p;
        continue;
      }
      ASSERT_EQ(s->vals->cell.values.at(0).item<float>(), float(step * 1000 + p));
      ASSERT_EQ(s->vals->cell.values.at(1).defined(), kind == 0) << "step " << step << " position " << p;
    }
    st->runner_fail(500, std::make_exception_ptr(std::runtime_error("step failed")));
  }
  // Positions the runner finished first: the host takes their values (ready) in the next step too.
  auto st = std::make_shared<StepState>();
  for (uint64_t p = 0; p < kPositions; ++p) {
    runner_finish(*st, p, {full({1}, 7.0f)});
    bool ready = false;
    CellSlot* s = st->host_cell(p, &ready);
    EXPECT_TRUE(ready) << p;
    EXPECT_FALSE(st->error_at(p));
    EXPECT_EQ(s->vals->cell.values.at(0).item<float>(), 7.0f);
    st->host_release(*s);
  }
}

// Past the inline page (16 chunks) the slot directory grows pages of 32, 64, ... chunks. Every
// position keeps its own slot, and a failure reaches the positions from the failed one on,
// including those of chunks made after it.
TEST(StepSlots, PositionsPastTheInlinePageGetSlotsOfTheirOwn) {
  constexpr uint64_t kPositions = 70000;  // 274 chunks: pages 0 to 4
  auto st = std::make_shared<StepState>();
  std::vector<CellSlot*> slots;
  for (uint64_t p = 0; p < kPositions; ++p) {
    if (p % 2) st->runner_store(p, {full({1}, float(p))});  // the runner first on odd positions
    slots.push_back(st->host_cell(p));
    if (p % 2 == 0) st->runner_store(p, {full({1}, float(p))});
  }
  for (uint64_t p = 0; p < kPositions; ++p) ASSERT_EQ(&slots[p]->vals->cell, &slots[p]->vals->cell);
  for (uint64_t p = 0; p < kPositions; p += 997) ASSERT_EQ(slots[p]->vals->cell.values.at(0).item<float>(), float(p)) << p;
  st->runner_fail(kPositions, std::make_exception_ptr(std::runtime_error("step failed")));
  st->host_cell(kPositions + 300);  // a chunk made after the failure
  EXPECT_TRUE(st->error_at(kPositions + 300));
  EXPECT_TRUE(st->error_at(kPositions));
  EXPECT_FALSE(st->error_at(kPositions - 1));  // before the failed op: its value stands
}

// The host makes cells while the runner stores and advances, both growing the directory: each
// cell ends with its own position's value, and a cell the host found ready already held it
// (ThreadSanitizer checks the rest).
TEST(StepSlots, HostAndRunnerMeetOnEverySlotConcurrently) {
  constexpr uint64_t kPositions = 20000;
  for (int round = 0; round < 3; ++round) {
    auto st = std::make_shared<StepState>();
    std::vector<CellSlot*> slots(kPositions);
    std::thread runner([&] {
      for (uint64_t p = 0; p < kPositions; ++p) runner_finish(*st, p, {full({1}, float(p))});
    });
    for (uint64_t p = 0; p < kPositions; ++p) {
      bool r = false;
      slots[p] = st->host_cell(p, &r);
      if (r) ASSERT_EQ(slots[p]->vals->cell.values.at(0).item<float>(), float(p)) << p;
    }
    runner.join();
    for (uint64_t p = 0; p < kPositions; ++p) ASSERT_EQ(slots[p]->vals->cell.values.at(0).item<float>(), float(p)) << p;
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
  EXPECT_FALSE(a->vals->cell.values.empty());  // the runner has not been told yet
  st->flush_host_drops();
  EXPECT_TRUE(st->has_ring_drops());
  st->runner_take_ring_drops(drops);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].pos, 0u);
  st->runner_store(2, {full({1}, 2.0f)});
  EXPECT_TRUE(a->vals->cell.values.empty());  // freed by the runner at its next store

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
  EXPECT_TRUE(b->vals->cell.values.empty());
}

// The host usually drops a placeholder before the runner reaches its op: the runner then never
// keeps that value (the position, or the one output that died), and says so to a fused group.
TEST(StepSlots, AValueDroppedBeforeTheRunnerStoresItIsNeverKept) {
  auto st = std::make_shared<StepState>();
  CellSlot* whole = st->host_cell(0);
  st->host_release(*whole);  // its only reference: the position died
  CellSlot* half = st->host_cell(1);
  half->refs.fetch_add(2);  // two placeholders; then the maker's reference and output 0's go
  st->host_release(*half);
  st->host_release_out(*half, 0);
  st->flush_host_drops();
  EXPECT_FALSE(st->host_may_read(0));  // the host's record says so before the runner took the drop
  st->runner_store(0, {full({1}, 1.0f)});
  EXPECT_TRUE(whole->vals->cell.values.empty());
  EXPECT_FALSE(st->host_may_read(0));
  st->runner_store(1, {full({1}, 2.0f), full({1}, 3.0f)});
  ASSERT_EQ(half->vals->cell.values.size(), 2u);
  EXPECT_FALSE(half->vals->cell.values[0].defined());
  EXPECT_EQ(half->vals->cell.values[1].item<float>(), 3.0f);
  EXPECT_TRUE(st->host_may_read(1));
  st->host_release_out(*half, 1);  // the last one: the position dies, stored, so freed at the next store
  st->flush_host_drops();
  st->runner_store(2, {});
  EXPECT_TRUE(half->vals->cell.values.empty());
}

// Once the runner is done with a step, whoever drops a placeholder frees its value: two outputs
// of one position dying on two threads at once (one the last of the position) must not clear it
// together (ThreadSanitizer checks), and every value is freed.
TEST(StepSlots, OutputsOfOnePositionDyingOnTwoThreadsAfterTheStepAreFreedOnce) {
  constexpr uint64_t kPositions = 3000;
  auto st = std::make_shared<StepState>();
  std::vector<CellSlot*> slots;
  for (uint64_t p = 0; p < kPositions; ++p) {
    CellSlot* s = st->host_cell(p);
    s->refs.fetch_add(2);  // two placeholders, then the maker's reference goes
    st->host_release(*s);
    st->runner_store(p, {full({2}, 1.0f), full({2}, 2.0f)});
    slots.push_back(s);
  }
  EXPECT_EQ(slots[0]->vals->chunk->live.load(), uint32_t(runtime::kSlotChunk));
  st->host_reclaim();  // the runner is done with it
  auto drop = [&](uint32_t out) {
    for (CellSlot* s : slots) st->host_release_out(*s, out);
  };
  std::thread a(drop, 0), b(drop, 1);
  a.join();
  b.join();
  for (uint64_t p = 0; p < kPositions; ++p) ASSERT_TRUE(slots[p]->vals->cell.values.empty()) << p;
  for (uint64_t p = 0; p < kPositions; p += runtime::kSlotChunk) EXPECT_EQ(slots[p]->vals->chunk->live.load(), 0u) << p;
}

}  // namespace
}  // namespace terra
