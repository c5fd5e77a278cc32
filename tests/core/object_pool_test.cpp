// The small-object pool (core/object_pool.h): blocks are reused within a thread and across threads
// (one thread allocating what another frees, as the GraphRunner and the host do), objects made by
// make_pooled live and die like make_shared's, and steady-state reuse takes no fresh block.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "terra/core/object_pool.h"
#include "terra/terra.h"

namespace terra {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kPassthrough = true;  // the sanitizers see every object: nothing is pooled
#else
constexpr bool kPassthrough = false;
#endif

TEST(ObjectPool, BlocksAreAlignedWritableAndDistinct) {
  std::vector<void*> blocks;
  std::set<uintptr_t> seen;
  for (size_t bytes : {1, 15, 16, 17, 48, 304, 1000, 1024, 1025, 5000}) {
    void* p = pool_allocate(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u) << bytes;
    std::memset(p, 0xab, bytes);
    EXPECT_TRUE(seen.insert(reinterpret_cast<uintptr_t>(p)).second) << bytes;
    blocks.push_back(p);
  }
  size_t i = 0;
  for (size_t bytes : {1, 15, 16, 17, 48, 304, 1000, 1024, 1025, 5000}) pool_deallocate(blocks[i++], bytes);
}

TEST(ObjectPool, SteadyStateReusesBlocks) {
  if (kPassthrough) GTEST_SKIP() << "sanitizer build: the pool forwards to operator new";
  for (int warm = 0; warm < 2; ++warm) {  // the first round may carve fresh blocks
    const int64_t before = pool_stats().fresh_blocks;
    std::vector<void*> v;
    for (int k = 0; k < 300; ++k) v.push_back(pool_allocate(304));
    for (void* p : v) pool_deallocate(p, 304);
    if (warm == 1) EXPECT_EQ(pool_stats().fresh_blocks, before);
  }
}

TEST(ObjectPool, OneThreadAllocatesAnotherFrees) {
  // Far more than a thread keeps (2 x 256 per class): the surplus travels through the shared list.
  constexpr int kN = 5000;
  for (int round = 0; round < 3; ++round) {
    std::vector<void*> made(kN);
    std::thread producer([&] {
      for (int k = 0; k < kN; ++k) {
        made[size_t(k)] = pool_allocate(48);
        std::memcpy(made[size_t(k)], &k, sizeof k);
      }
    });
    producer.join();
    std::set<void*> distinct(made.begin(), made.end());
    EXPECT_EQ(distinct.size(), size_t(kN));
    for (int k = 0; k < kN; ++k) {
      int got;
      std::memcpy(&got, made[size_t(k)], sizeof got);
      ASSERT_EQ(got, k);
      pool_deallocate(made[size_t(k)], 48);
    }
  }
  if (kPassthrough) return;
  // What this thread freed is there for another thread to take without carving new slabs.
  const int64_t before = pool_stats().fresh_blocks;
  std::thread taker([&] {
    std::vector<void*> v;
    for (int k = 0; k < 4000; ++k) v.push_back(pool_allocate(48));
    for (void* p : v) pool_deallocate(p, 48);
  });
  taker.join();
  EXPECT_LT(pool_stats().fresh_blocks - before, 1000);
}

struct Counted {
  static inline int alive = 0;
  int64_t payload[5] = {1, 2, 3, 4, 5};
  Counted() { ++alive; }
  ~Counted() { --alive; }
};

TEST(ObjectPool, MakePooledOwnsLikeMakeShared) {
  {
    auto a = make_pooled<Counted>();
    std::weak_ptr<Counted> w = a;
    auto b = a;
    EXPECT_EQ(Counted::alive, 1);
    EXPECT_EQ(a->payload[4], 5);
    a.reset();
    EXPECT_FALSE(w.expired());
    b.reset();
    EXPECT_TRUE(w.expired());
    EXPECT_EQ(Counted::alive, 0);
  }
  // Tensors built on pooled impls and storages behave as before.
  Tensor t = full({3, 4}, 2.0f);
  Tensor u = t + t;
  EXPECT_EQ(u.shape(), (Shape{3, 4}));
  EXPECT_EQ(u.to_vector<float>(), std::vector<float>(12, 4.0f));
}

}  // namespace
}  // namespace terra
