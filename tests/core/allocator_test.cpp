// The tensor allocator (core/allocator.h): freed blocks of every size up to the largest class are
// kept and handed out again (a large tensor freed and made again each step must not page-fault its
// memory in each time), counted in the stats, and given back by empty_cache().
#include <gtest/gtest.h>
#include <link.h>

#include <cstdint>
#include <cstring>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "terra/terra.h"

namespace terra {
namespace {

TEST(Allocator, ReusesFreedBlocksOfEverySize) {
  // Small, medium (thread caches) and large (the shared pool, above 64 KiB), with sizes that sit
  // just inside and just past a class boundary.
  for (size_t bytes : {size_t(100), size_t(5000), size_t(3) << 20, (size_t(16) << 20) + 1, size_t(40) << 20}) {
    void* a = allocate(bytes);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u) << bytes;
    std::memset(a, 1, bytes);  // the whole block is usable
    deallocate(a, bytes);
    const AllocatorStats before = allocator_stats();
    void* b = allocate(bytes);
    const AllocatorStats after = allocator_stats();
    EXPECT_EQ(b, a) << bytes << " bytes: the freed block was not reused";
    EXPECT_EQ(after.cache_hits, before.cache_hits + 1) << bytes;
    EXPECT_EQ(after.allocations, before.allocations + 1) << bytes;
    EXPECT_GE(after.bytes_in_use, before.bytes_in_use + int64_t(bytes)) << bytes;
    EXPECT_LT(after.bytes_cached, before.bytes_cached) << bytes;
    deallocate(b, bytes);
  }
}

TEST(Allocator, BlocksAbove64KiBFreedOnAnotherThreadAreReusedHere) {
  // Co-execution frees many blocks on another thread than the one that made them. Kept in that
  // thread's cache, they were lost to this one: both caches grew (RSS well above eager's).
  const size_t bytes = (size_t(300) << 10) + 8;
  void* a = allocate(bytes);
  std::promise<void> freed, done;
  std::thread other([&] {
    deallocate(a, bytes);
    freed.set_value();
    done.get_future().wait();  // alive: a thread's exit would hand its cache back anyway
  });
  freed.get_future().wait();
  void* b = allocate(bytes);
  done.set_value();
  other.join();
  EXPECT_EQ(b, a);
  deallocate(b, bytes);
}

TEST(Allocator, LargeBlocksOfOneClassAreDistinctAndEmptyCacheReturnsThem) {
  const size_t bytes = size_t(24) << 20;
  std::vector<void*> blocks;
  std::set<void*> seen;
  for (int i = 0; i < 3; ++i) {
    blocks.push_back(allocate(bytes));
    seen.insert(blocks.back());
  }
  EXPECT_EQ(seen.size(), 3u);
  for (void* b : blocks) deallocate(b, bytes);
  EXPECT_GE(allocator_stats().bytes_cached, int64_t(3 * bytes));
  empty_cache();
  EXPECT_LT(allocator_stats().bytes_cached, int64_t(bytes));
  // Still usable after the cache was emptied.
  void* b = allocate(bytes);
  std::memset(b, 0, bytes);
  deallocate(b, bytes);
}

TEST(Allocator, TensorsAboveEightMiBReuseTheirStorageAcrossSteps) {
  // 4M floats (16 MiB): what an op over a large activation allocates each step.
  const int64_t n = int64_t(1) << 22;
  Tensor x = full({n}, 2.0f);
  const void* first = nullptr;
  for (int step = 0; step < 3; ++step) {
    const AllocatorStats before = allocator_stats();
    Tensor y = add(x, x);
    EXPECT_EQ(y.data_ptr<float>()[n - 1], 4.0f);
    if (step == 0) first = y.data_ptr<float>();
    else {
      EXPECT_EQ(y.data_ptr<float>(), first) << "step " << step;
      EXPECT_EQ(allocator_stats().cache_hits, before.cache_hits + 1) << "step " << step;
    }
  }
}

// libterra's thread-local block must fit glibc's static TLS surplus (rtld.optional_static_tls,
// 512 bytes by default); core/thread_heap.h says why and keeps the per-thread caches out of it.
TEST(Allocator, LibterrasThreadLocalBlockFitsStaticTls) {
  struct Found {
    uintptr_t probe;
    int64_t tls = -1;
  } f{reinterpret_cast<uintptr_t>(&allocate)};
  dl_iterate_phdr([](dl_phdr_info* info, size_t, void* data) -> int {
    auto& f = *static_cast<Found*>(data);
    bool mine = false;
    int64_t tls = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
      const auto& ph = info->dlpi_phdr[i];
      uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
      if (ph.p_type == PT_LOAD && f.probe >= lo && f.probe < lo + ph.p_memsz) mine = true;
      if (ph.p_type == PT_TLS) tls = int64_t(ph.p_memsz);
    }
    if (mine) f.tls = tls;
    return mine;
  }, &f);
  ASSERT_GE(f.tls, 0) << "libterra not found among the loaded objects";
  EXPECT_LE(f.tls, 448) << "libterra's PT_TLS is " << f.tls << " bytes";
}

}  // namespace
}  // namespace terra
