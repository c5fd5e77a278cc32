// The host -> runner channel's wake-up protocol (runtime/channel.h). A producer publishes without
// a full fence when the kernel offers membarrier (core/wait.h): a sleeping consumer fences for it.
// A lost wake-up leaves the runner asleep while the host waits for it, a deadlock: each test
// publishes while the consumer is on its way to sleep or asleep, and fails if the consumer does
// not see the value within a generous bound.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "terra/core/wait.h"
#include "terra/runtime/channel.h"

namespace terra {
namespace {

using runtime::Channel;
using runtime::Message;
using Clock = std::chrono::steady_clock;

// Waits up to `limit` for `seen` to reach `v`; true if it did.
bool seen_within(const std::atomic<uint64_t>& seen, uint64_t v, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (seen.load() < v)
    if (Clock::now() > end) return false;
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  return true;
}

// Delays that put the publish before, during and after the consumer's 2 ms of spinning.
std::chrono::microseconds delay(std::mt19937& rng) {
  static constexpr int kUs[] = {0, 5, 300, 1900, 2000, 2100, 2500, 4000};
  return std::chrono::microseconds(kUs[rng() % 8] + int(rng() % 200));
}

TEST(Channel, APublishedWordWakesASleepingConsumer) {
  Channel ch;
  std::atomic<uint64_t> word{0}, seen{0};
  constexpr uint64_t kRounds = 150;
  std::thread consumer([&] {
    for (uint64_t i = 1; i <= kRounds; ++i) {
      ch.wait_until([&] { return word.load(std::memory_order_acquire) >= i; });
      seen.store(i);
    }
  });
  std::mt19937 rng(7);
  uint64_t lost = 0;
  for (uint64_t i = 1; i <= kRounds; ++i) {
    std::this_thread::sleep_for(delay(rng));
    ch.publish(word, i);
    if (!seen_within(seen, i, std::chrono::milliseconds(1000))) {
      ++lost;
      ch.publish(word, i);  // wakes it (it is asleep by now) so the test can go on
      ASSERT_TRUE(seen_within(seen, i, std::chrono::milliseconds(5000)));
    }
  }
  consumer.join();
  EXPECT_EQ(lost, 0u) << "the consumer slept through " << lost << " published values"
                      << (heavy_barrier_available() ? " (membarrier fences)" : " (full fences)");
}

TEST(Channel, ACommittedMessageWakesASleepingConsumer) {
  Channel ch;
  std::atomic<uint64_t> seen{0};
  constexpr uint64_t kRounds = 150;
  std::thread consumer([&] {
    while (seen.load() < kRounds) {
      const uint64_t v = ch.front().seq;
      ch.pop();
      seen.store(v);
    }
  });
  auto send = [&](uint64_t i) {
    Message& m = ch.back();
    m.kind = Message::Validate;
    m.seq = i;
    ch.commit();
  };
  std::mt19937 rng(11);
  uint64_t lost = 0;
  for (uint64_t i = 1; i <= kRounds; ++i) {
    std::this_thread::sleep_for(delay(rng));
    send(i);
    if (!seen_within(seen, i, std::chrono::milliseconds(1000))) {
      ++lost;
      send(i);  // the same position again: wakes it so the test can go on
      ASSERT_TRUE(seen_within(seen, i, std::chrono::milliseconds(5000)));
    }
  }
  consumer.join();
  EXPECT_EQ(lost, 0u) << "the consumer slept through " << lost << " committed messages";
}

}  // namespace
}  // namespace terra
