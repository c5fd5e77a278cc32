// Locations: equality and hashing of frame chains, and the text of a binding's frames (the part of
// `frames` after a 0, in pairs) through the describer a binding installs.
#include <gtest/gtest.h>

#include "terra/trace/location.h"

using namespace terra;

namespace {
trace::Location with_hash(std::vector<uintptr_t> frames) {
  // The hash as capture_location makes it: capture with a provider that returns these frames.
  static thread_local const std::vector<uintptr_t>* src = nullptr;
  src = &frames;
  trace::Location l;
  trace::set_location_provider([](trace::Location& out) { out.frames = *src; });
  trace::capture_location(l);
  trace::set_location_provider(nullptr);
  return l;
}

std::string fake_site(uintptr_t code, uintptr_t off) {
  if (code == 0x1000) return "train.py:" + std::to_string(off) + " in step";
  return "";  // a pair the binding never saw
}
}  // namespace

TEST(Location, SameFramesEqualDifferentFramesDiffer) {
  trace::Location a = with_hash({0x10, 0x20, 0, 0x1000, 12});
  trace::Location b = with_hash({0x10, 0x20, 0, 0x1000, 12});
  trace::Location c = with_hash({0x10, 0x20, 0, 0x1000, 14});  // another instruction offset
  trace::Location d = with_hash({0x10, 0x20, 0, 0x1000});       // odd lengths hash too
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_FALSE(a == c);
  EXPECT_NE(a.hash, c.hash);
  EXPECT_FALSE(a == d);
}

TEST(Location, BindingFramesAreNamedByTheDescriber) {
  trace::Location l = with_hash({0x10, 0x20, 0, 0x1000, 12, 0x2000, 30, 0x1000, 40});
  trace::set_frame_describer(nullptr);
  EXPECT_EQ(l.user_str(), "");  // nothing can name them
  trace::set_frame_describer(&fake_site);
  EXPECT_EQ(l.user_str(), "train.py:12 in step <- train.py:40 in step");  // unknown pairs skipped
  EXPECT_EQ(l.user_str(1), "train.py:12 in step");
  EXPECT_NE(l.str().find("train.py:12 in step <- train.py:40 in step"), std::string::npos);
  trace::set_frame_describer(nullptr);
}

// location_is compares the chain capture_location would make, from the same frame, without making
// it: equal at the same call site, unequal at another site or at a chain one frame longer or
// shorter, and never true for a chain it cannot compare.
namespace {
struct Probe {
  trace::Location captured;
  const trace::Location* expected = nullptr;
  bool same = false;
};

// Captures, or compares with `expected`, from one frame: both walks start at its caller.
__attribute__((noinline)) void probe(Probe& p) {
  if (p.expected) p.same = trace::location_is(*p.expected);
  else trace::capture_location(p.captured);
  asm volatile("" ::: "memory");  // not a tail call: this frame stays on the chain
}
__attribute__((noinline)) void site_a(Probe& p) {
  probe(p);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void site_b(Probe& p) {
  probe(p);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void via_a(Probe& p) {  // site_a one frame deeper
  site_a(p);
  asm volatile("" ::: "memory");
}
// Calls `site` with the step's base at this frame: every chain ends with the same return address,
// whichever line of the test called.
__attribute__((noinline)) void at(void (*site)(Probe&), Probe& p) {
  void* saved = trace::step_base();
  trace::set_step_base(__builtin_frame_address(0));
  site(p);
  trace::set_step_base(saved);
}
}  // namespace

TEST(Location, LocationIsComparesTheChainCaptureWouldMake) {
  trace::set_location_provider(nullptr);
  Probe a, b, deeper;
  at(&site_a, a);
  at(&site_b, b);
  at(&via_a, deeper);
  ASSERT_FALSE(a.captured.frames.empty());
  EXPECT_FALSE(a.captured == b.captured);
  EXPECT_EQ(deeper.captured.frames.size(), a.captured.frames.size() + 1);

  for (int i = 0; i < 3; ++i) {  // the first compare may validate addresses; later ones hit the cache
    Probe p;
    p.expected = &a.captured;
    at(&site_a, p);
    EXPECT_TRUE(p.same) << "the same site, compared in place";
    p.same = true;
    at(&site_b, p);
    EXPECT_FALSE(p.same) << "another site";
    p.same = true;
    at(&via_a, p);
    EXPECT_FALSE(p.same) << "the chain goes on past the expected one";
    p.expected = &deeper.captured;
    p.same = true;
    at(&site_a, p);
    EXPECT_FALSE(p.same) << "the chain ends before the expected one";
    p.same = false;
    at(&via_a, p);
    EXPECT_TRUE(p.same);
  }

  // A binding's location (a 0, then its pairs) never equals a C++ walk's.
  trace::Location with_binding = a.captured;
  with_binding.frames.push_back(0);
  with_binding.frames.push_back(0x1000);
  with_binding.frames.push_back(12);
  Probe p;
  p.expected = &with_binding;
  p.same = true;
  at(&site_a, p);
  EXPECT_FALSE(p.same);

  // A provider without a matcher: location_is cannot compare, so it says false (the caller captures).
  trace::set_location_provider([](trace::Location& out) { out.frames = {0x10, 0x20}; });
  trace::Location from_provider;
  trace::capture_location(from_provider);
  p.expected = &from_provider;
  p.same = true;
  at(&site_a, p);
  EXPECT_FALSE(p.same);
  trace::set_location_provider(nullptr);
}
