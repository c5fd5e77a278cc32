// The precompiled optimizer loops against the generic tiled path over the same FusedKernel: the
// same bits (this fails if the compiler contracted a*b + c into one FMA), and the loop is used
// only when every slot is what it was written for.
#include <gtest/gtest.h>

#include <cstring>

#include <terra/terra.h>

#include "terra/compile/fused_elementwise.h"
#include "terra/compile/pattern_kernels.h"

namespace terra::compile {
namespace {

const Attrs kNone;

// Adam's first half as the runner plans it: slots m, b1, g, c1, t, v, b2, g, c2, t, g, t.
FusedKernel moments(int64_t n) {
  FusedKernel k;
  k.numel = n;
  k.slot_dtype.assign(12, DType::Float32);
  k.ops = {{find_op("mul_"), &kNone, {0, 1}, 0},  {find_op("mul"), &kNone, {2, 3}, 4},
           {find_op("add_"), &kNone, {0, 4}, 0},  {find_op("mul_"), &kNone, {5, 6}, 5},
           {find_op("mul"), &kNone, {7, 8}, 9},   {find_op("mul"), &kNone, {10, 9}, 11},
           {find_op("add_"), &kNone, {5, 11}, 5}};
  k.finish();
  return k;
}

// Adam's second half: slots v, t, sc0, t, eps, t, m, t, sc1, t, p.
FusedKernel update(int64_t n) {
  FusedKernel k;
  k.numel = n;
  k.slot_dtype.assign(11, DType::Float32);
  k.ops = {{find_op("sqrt"), &kNone, {0}, 1},     {find_op("div"), &kNone, {1, 2}, 3},
           {find_op("add"), &kNone, {3, 4}, 5},   {find_op("div"), &kNone, {6, 5}, 7},
           {find_op("mul"), &kNone, {7, 8}, 9},   {find_op("add_"), &kNone, {10, 9}, 10}};
  k.finish();
  return k;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

TEST(PatternKernels, AdamHalvesMatchTheGenericPathBitForBit) {
  const int64_t n = 50001;
  manual_seed(9);
  Tensor g = randn({n}), m0 = randn({n}), v0 = rand({n}), p0 = randn({n});
  auto s = [](double x) { return scalar_tensor(x); };
  FusedKernel km = moments(n), ku = update(n);
  ASSERT_NE(km.pattern, nullptr);
  ASSERT_NE(ku.pattern, nullptr);
  EXPECT_STREQ(km.pattern->name, "adam_moments");
  EXPECT_STREQ(ku.pattern->name, "adam_update");

  Tensor m1 = m0.clone(), v1 = v0.clone(), p1 = p0.clone();  // precompiled loops
  Tensor m2 = m0.clone(), v2 = v0.clone(), p2 = p0.clone();  // generic tiles
  std::vector<Tensor> sm1{m1, s(0.9), g, s(0.1), {}, v1, s(0.999), g, s(0.001), {}, g, {}};
  std::vector<Tensor> sm2{m2, s(0.9), g, s(0.1), {}, v2, s(0.999), g, s(0.001), {}, g, {}};
  std::vector<Tensor> su1{v1, {}, s(0.7), {}, s(1e-8), {}, m1, {}, s(-0.003), {}, p1};
  std::vector<Tensor> su2{v2, {}, s(0.7), {}, s(1e-8), {}, m2, {}, s(-0.003), {}, p2};
  EXPECT_TRUE(pattern_applies(*km.pattern, km, sm1));
  EXPECT_TRUE(pattern_applies(*ku.pattern, ku, su1));
  run_fused(km, sm1);
  run_fused(ku, su1);
  FusedKernel gm = km, gu = ku;
  gm.pattern = gu.pattern = nullptr;
  run_fused(gm, sm2);
  run_fused(gu, su2);
  EXPECT_TRUE(same_bits(m1, m2));
  EXPECT_TRUE(same_bits(v1, v2));
  EXPECT_TRUE(same_bits(p1, p2));
  EXPECT_FALSE(same_bits(p1, p0));  // something happened
}

TEST(PatternKernels, UsedOnlyWhenTheSlotsFit) {
  const int64_t n = 1000;
  FusedKernel ku = update(n);
  ASSERT_NE(ku.pattern, nullptr);
  auto s = [](double x) { return scalar_tensor(x); };
  Tensor v = rand({n}), m = randn({n}), p = randn({n});
  std::vector<Tensor> ok{v, {}, s(0.7), {}, s(1e-8), {}, m, {}, s(-0.003), {}, p};
  EXPECT_TRUE(pattern_applies(*ku.pattern, ku, ok));
  std::vector<Tensor> held = ok;
  held[3] = empty({n});  // the host holds an intermediate: the generic path writes it out
  EXPECT_FALSE(pattern_applies(*ku.pattern, ku, held));
  std::vector<Tensor> aliased = ok;
  aliased[10] = m;  // the written slot is also read as m
  EXPECT_FALSE(pattern_applies(*ku.pattern, ku, aliased));
  std::vector<Tensor> f64 = ok;
  f64[0] = rand({n}, DType::Float64);
  EXPECT_FALSE(pattern_applies(*ku.pattern, ku, f64));
  FusedKernel other = ku;
  other.ops.pop_back();  // another chain: no precompiled loop
  other.finish();
  EXPECT_EQ(other.pattern, nullptr);
}

}  // namespace
}  // namespace terra::compile
