// SmallVector (core/small_vector.h) behaves like std::vector across the inline/heap boundary.
#include <gtest/gtest.h>

#include <sstream>
#include <utility>
#include <vector>

#include "terra/core/shape.h"
#include "terra/core/small_vector.h"

namespace terra {
namespace {

using SV = SmallVector<int64_t, 3>;

std::vector<int64_t> vec(const SV& s) { return std::vector<int64_t>(s.begin(), s.end()); }

TEST(SmallVector, ConstructorsMatchVector) {
  EXPECT_TRUE(SV().empty());
  EXPECT_EQ(vec(SV(4)), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(vec(SV(2, 7)), (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(vec(SV{1, 2, 3, 4, 5}), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  std::vector<int64_t> v{9, 8};
  EXPECT_EQ(vec(SV(v.begin(), v.end())), v);
  SV from = v;  // implicit from std::vector
  std::vector<int64_t> back = from;  // and back
  EXPECT_EQ(back, v);
}

TEST(SmallVector, CopyAndMoveAcrossInlineAndHeap) {
  for (size_t n : {0u, 2u, 3u, 4u, 9u}) {
    SV a;
    for (size_t i = 0; i < n; ++i) a.push_back(int64_t(i) * 10);
    SV b = a;
    EXPECT_EQ(a, b);
    SV c = std::move(b);
    EXPECT_EQ(a, c);
    EXPECT_TRUE(b.empty());
    b = c;
    EXPECT_EQ(b, a);
    SV d{5};
    d = std::move(c);
    EXPECT_EQ(d, a);
    d = d;  // self-assignment keeps the elements
    EXPECT_EQ(d, a);
    SV e{1, 2, 3, 4, 5, 6};
    e.swap(d);
    EXPECT_EQ(e, a);
    EXPECT_EQ(vec(d), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  }
}

TEST(SmallVector, EditsMatchVector) {
  std::vector<int64_t> ref;
  SV s;
  auto same = [&] { EXPECT_EQ(vec(s), ref); };
  for (int64_t i = 0; i < 5; ++i) {
    ref.push_back(i);
    s.push_back(i);
  }
  same();
  ref.insert(ref.begin() + 1, 42);
  s.insert(s.begin() + 1, 42);
  same();
  ref.insert(ref.end(), {7, 8});
  s.insert(s.end(), {7, 8});
  same();
  ref.insert(ref.begin(), ref.begin() + 2, ref.begin() + 5);  // a range inside the container itself
  s.insert(s.begin(), s.begin() + 2, s.begin() + 5);
  same();
  ref.erase(ref.begin() + 2);
  s.erase(s.begin() + 2);
  same();
  ref.erase(ref.begin(), ref.begin() + 3);
  s.erase(s.begin(), s.begin() + 3);
  same();
  s.push_back(s[0]);  // an element of itself, possibly across a reallocation
  ref.push_back(ref[0]);
  same();
  ref.resize(2);
  s.resize(2);
  same();
  ref.resize(6, -1);
  s.resize(6, -1);
  same();
  ref.pop_back();
  s.pop_back();
  same();
  EXPECT_EQ(s.front(), ref.front());
  EXPECT_EQ(s.back(), ref.back());
  EXPECT_EQ(*s.rbegin(), ref.back());
  EXPECT_THROW(s.at(100), std::out_of_range);
  s.assign(2, 3);
  ref.assign(2, 3);
  same();
  s.clear();
  EXPECT_TRUE(s.empty());
  EXPECT_GE(s.capacity(), SV::inline_capacity());
}

TEST(SmallVector, ComparesLikeVector) {
  EXPECT_EQ(SV({1, 2}), SV({1, 2}));
  EXPECT_NE(SV({1, 2}), SV({1, 2, 3}));
  EXPECT_LT(SV({1, 2}), SV({1, 2, 3}));
  EXPECT_LT(SV({1, 2, 3, 4}), SV({1, 3}));
  EXPECT_EQ(SV({1, 2}), (std::vector<int64_t>{1, 2}));
}

TEST(Shape, PrintsItsDims) {
  EXPECT_EQ(::testing::PrintToString(Shape{2, 3}), "[2, 3]");
  EXPECT_EQ(shape_str(Shape{2, 3}), "[2, 3]");
  EXPECT_EQ(Shape::inline_capacity(), 6u);
}

}  // namespace
}  // namespace terra
