// contiguous() of strided, transposed, sliced and broadcast views, for every copy path of
// copy_into (row copies, 32x32 transpose tiles, broadcast fills, the generic loop): each element
// checked against the value its multi-index names in the source.
#include <gtest/gtest.h>

#include <terra/terra.h>

using namespace terra;

namespace {

// Element at `idx` of view `v`, computed from its strides over the base tensor's flat values.
template <class T>
T at(const std::vector<T>& base, const Tensor& v, const std::vector<int64_t>& idx) {
  int64_t off = v.impl()->offset;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * v.impl()->strides[d];
  return base[size_t(off)];
}

template <class T>
void expect_contiguous_matches(const Tensor& base, const Tensor& v) {
  std::vector<T> b = base.to_vector<T>();
  Tensor c = v.contiguous();
  ASSERT_TRUE(c.is_contiguous());
  ASSERT_EQ(c.shape(), v.shape());
  std::vector<T> got = c.to_vector<T>();
  std::vector<int64_t> idx(v.shape().size(), 0);
  for (size_t flat = 0; flat < got.size(); ++flat) {
    ASSERT_EQ(got[flat], at(b, v, idx)) << "flat index " << flat << " of shape " << shape_str(v.shape());
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < v.shape()[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

TEST(CopyLayouts, TransposesOfEveryTileRemainder) {
  for (int64_t r : {1, 7, 32, 33, 70})
    for (int64_t c : {1, 5, 31, 64, 65}) {
      Tensor a = arange(0, r * c, 1, DType::Float32).reshape({r, c});
      expect_contiguous_matches<float>(a, a.t());
    }
}

TEST(CopyLayouts, BatchedTransposesAndPermutes) {
  Tensor a = arange(0, 2 * 3 * 40 * 50, 1, DType::Float32).reshape({2, 3, 40, 50});
  expect_contiguous_matches<float>(a, transpose(a, 2, 3));
  expect_contiguous_matches<float>(a, permute(a, {0, 2, 1, 3}));
  expect_contiguous_matches<float>(a, permute(a, {3, 1, 0, 2}));
  expect_contiguous_matches<float>(a, permute(a, {1, 3, 2, 0}));
}

TEST(CopyLayouts, SlicesAndStepsAndBroadcasts) {
  Tensor a = arange(0, 12 * 20, 1, DType::Float32).reshape({12, 20});
  expect_contiguous_matches<float>(a, slice(a, 1, 3, 17));
  expect_contiguous_matches<float>(a, slice(a, 0, 1, 11, 3));
  expect_contiguous_matches<float>(a, slice(slice(a, 1, 0, 20, 2), 0, 2, 9));
  Tensor row = arange(0, 20, 1, DType::Float32).reshape({1, 20});
  expect_contiguous_matches<float>(row, expand(row, {6, 20}));
  Tensor col = arange(0, 12, 1, DType::Float32).reshape({12, 1});
  expect_contiguous_matches<float>(col, expand(col, {12, 9}));
  Tensor s = full({}, 3.0f);
  expect_contiguous_matches<float>(s, expand(s.reshape({1, 1}), {4, 5}));
}

TEST(CopyLayouts, OtherWordSizes) {
  Tensor i64 = arange(0, 30 * 17, 1, DType::Int64).reshape({30, 17});
  expect_contiguous_matches<int64_t>(i64, i64.t());
  Tensor f64 = arange(0, 9 * 40, 1, DType::Float64).reshape({9, 40});
  expect_contiguous_matches<double>(f64, slice(f64.t(), 0, 3, 33));
  Tensor b = lt(arange(0, 35 * 3, 1, DType::Int64), 50.0).reshape({35, 3});
  expect_contiguous_matches<bool>(b, b.t());
}
