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
