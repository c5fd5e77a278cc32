// Which words of a frame chain count as return addresses: the byte patterns of x86-64 calls, and
// addresses that are not in loaded code (stack, heap, data) or do not follow a call.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "terra/trace/return_address.h"

using terra::trace::ends_with_call;
using terra::trace::is_return_address;

namespace {
bool call_ends(std::vector<uint8_t> bytes) { return ends_with_call(bytes.data() + bytes.size(), bytes.size()); }

__attribute__((noinline)) uintptr_t my_return_address() {
  uintptr_t a = reinterpret_cast<uintptr_t>(__builtin_extract_return_addr(__builtin_return_address(0)));
  asm volatile("" ::: "memory");  // not a tail call
  return a;
}
const uint8_t kData[16] = {0x90, 0xE8, 1, 2, 3, 4};  // a call's bytes, but not in code
}  // namespace

#if defined(__x86_64__)
TEST(ReturnAddress, CallInstructionsOfEveryFormEndTheBytes) {
  EXPECT_TRUE(call_ends({0x48, 0x89, 0xC7, 0xE8, 0x10, 0x20, 0x30, 0x40}));  // call rel32
  EXPECT_TRUE(call_ends({0x90, 0xFF, 0xD0}));                                  // call rax
  EXPECT_TRUE(call_ends({0x90, 0x41, 0xFF, 0xD3}));                            // call r11
  EXPECT_TRUE(call_ends({0xFF, 0x15, 1, 2, 3, 4}));                            // call [rip+disp32]
  EXPECT_TRUE(call_ends({0x90, 0xFF, 0x10}));                                  // call [rax]
  EXPECT_TRUE(call_ends({0x90, 0xFF, 0x50, 0x08}));                            // call [rax+8]
  EXPECT_TRUE(call_ends({0x90, 0xFF, 0x54, 0x24, 0x08}));                      // call [rsp+8]
  EXPECT_TRUE(call_ends({0xFF, 0x94, 0x24, 1, 2, 3, 4}));                      // call [rsp+disp32]
  EXPECT_TRUE(call_ends({0xFF, 0x14, 0x25, 1, 2, 3, 4}));                      // call [disp32] (SIB, no base)
  EXPECT_TRUE(call_ends({0xFF, 0x90, 1, 2, 3, 4}));                            // call [rax+disp32]
}

TEST(ReturnAddress, OtherInstructionsDoNot) {
  EXPECT_FALSE(call_ends({0x90, 0xFF, 0xE0}));                  // jmp rax (FF /4)
  EXPECT_FALSE(call_ends({0x90, 0xFF, 0xC0}));                  // inc eax (FF /0)
  EXPECT_FALSE(call_ends({0x48, 0x89, 0xE5}));                  // mov rbp, rsp
  EXPECT_FALSE(call_ends({0xE9, 1, 2, 3, 4}));                  // jmp rel32
  EXPECT_FALSE(call_ends({0xFF, 0x50, 0x08, 0x90}));            // call [rax+8], then a nop
  EXPECT_FALSE(call_ends({0xFF, 0x15, 1, 2, 3}));               // rip-relative call cut short
  EXPECT_FALSE(call_ends({0x54, 0x24}));                        // a SIB form needs its FF
  EXPECT_FALSE(ends_with_call(kData + 6, 4));                   // a call rel32 needs 5 bytes of room
  EXPECT_TRUE(ends_with_call(kData + 6, 5));
}
#endif

TEST(ReturnAddress, OnlyAddressesAfterACallInLoadedCode) {
  EXPECT_TRUE(is_return_address(my_return_address()));
  EXPECT_TRUE(is_return_address(my_return_address()));  // a second time, from the cache
  int on_stack = 0;
  auto on_heap = std::make_unique<int>(0);
  EXPECT_FALSE(is_return_address(reinterpret_cast<uintptr_t>(&on_stack)));
  EXPECT_FALSE(is_return_address(reinterpret_cast<uintptr_t>(on_heap.get())));
  EXPECT_FALSE(is_return_address(reinterpret_cast<uintptr_t>(kData + 6)));
  EXPECT_FALSE(is_return_address(0));
  EXPECT_FALSE(is_return_address(3));
  EXPECT_FALSE(is_return_address(~uintptr_t(0)));
}

// Two return addresses of one walk whose cache set is the same both stay cached: with one entry
// per set they evicted each other on every op call (~200 instructions an op in co-execution).
TEST(ReturnAddress, TwoAddressesOfOneSetBothStayCached) {
  namespace d = terra::trace::detail;
  const uintptr_t a = my_return_address();
  std::atomic<uintptr_t>* set = d::g_seen + d::seen_set(a);
  const uintptr_t other = a ^ 0x40;  // stands for another validated address of this set
  set[0].store(other);
  set[1].store(0);
  ASSERT_TRUE(is_return_address(a));  // validated and cached beside `other`
  EXPECT_EQ(set[0].load(), other);
  EXPECT_EQ(set[1].load(), a);
}
