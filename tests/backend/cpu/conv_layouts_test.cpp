// float32 convolutions on oneDNN (backend/cpu/conv_dnnl.cpp): both layouts (plain NCHW, and
// blocked with reorders in and out) match the float64 loops on awkward geometries (channels not a
// multiple of the block, groups, dilation, stride, uneven batch slices); the measured rule picks
// what it says; a weight changed in place is never served from a stale reorder; steady-state calls
// create no primitive.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <terra/terra.h>

#include "terra/backend/cpu/conv_dnnl.h"
#include "terra/backend/cpu/dnnl_common.h"

using namespace terra;
namespace cd = terra::kernels::conv_dnnl;

namespace {

struct Guard {
  int threads = num_threads();
  ~Guard() {
    set_num_threads(threads);
    cd::set_layout(cd::Layout::Auto);
  }
};

struct Case {
  int64_t n, c, h, w, o, kh, kw;
  Int2 s, p, d;
  int64_t g;
  std::string name() const {
    return "N" + std::to_string(n) + " C" + std::to_string(c) + " " + std::to_string(h) + "x" + std::to_string(w) +
           " O" + std::to_string(o) + " k" + std::to_string(kh) + "x" + std::to_string(kw) + " G" + std::to_string(g);
  }
};

// Big enough to take the blocked path under the rule and to split over two threads; N = 3 gives
// slices of 2 and 1 images (two primitives per call).
const Case kCases[] = {
    {4, 16, 12, 12, 24, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},  // block-aligned
    {3, 13, 11, 9, 20, 3, 3, {2, 1}, {1, 0}, {1, 1}, 1},   // odd channels, uneven slices, asymmetric
    {5, 12, 10, 10, 18, 3, 2, {1, 2}, {2, 1}, {2, 1}, 1},  // dilated, non-square kernel
    {4, 16, 9, 9, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},    // grouped
    {3, 3, 14, 14, 16, 5, 5, {2, 2}, {2, 2}, {1, 1}, 1},   // stem-like: 3 input channels
    {4, 1, 16, 16, 16, 4, 4, {2, 2}, {1, 1}, {1, 1}, 1},   // 1 input channel
    {4, 24, 8, 8, 40, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},    // 1x1
};

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  std::vector<float> a = got.to_vector<float>();
  std::vector<double> b = want.to_vector<double>();
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], 1e-5 * std::max(1.0, scale)) << what << " at " << i;
}

void check_all_passes(const Case& k, const std::string& tag) {
  manual_seed(3);
  Tensor x = randn({k.n, k.c, k.h, k.w}), w = randn({k.o, k.c / k.g, k.kh, k.kw}), b = randn({k.o});
  Tensor y = conv2d(x, w, b, k.s, k.p, k.d, k.g);
  Tensor x64 = x.to(DType::Float64), w64 = w.to(DType::Float64), b64 = b.to(DType::Float64);
  expect_close(y, conv2d(x64, w64, b64, k.s, k.p, k.d, k.g), tag + " forward " + k.name());
  Tensor gy = randn(y.shape()), gy64 = gy.to(DType::Float64);
  expect_close(conv2d_backward_input(gy, w, x.shape(), k.s, k.p, k.d, k.g),
               conv2d_backward_input(gy64, w64, x.shape(), k.s, k.p, k.d, k.g), tag + " input grad " + k.name());
  expect_close(conv2d_backward_weight(gy, x, w.shape(), k.s, k.p, k.d, k.g),
               conv2d_backward_weight(gy64, x64, w.shape(), k.s, k.p, k.d, k.g), tag + " weight grad " + k.name());
  // The transposed conv runs the input-gradient primitive: y's shape back to x's.
  Tensor wt = randn({k.o, k.c / k.g, k.kh, k.kw});
  expect_close(conv_transpose2d(gy, wt, {}, k.s, k.p, {0, 0}, k.g, k.d),
               conv_transpose2d(gy64, wt.to(DType::Float64), {}, k.s, k.p, {0, 0}, k.g, k.d),
               tag + " transposed " + k.name());
}

cd::Geo geo(int64_t n, int64_t c, int64_t hw, int64_t o, int64_t k, int64_t s, int64_t p) {
  int64_t oh = (hw + 2 * p - k) / s + 1;
  return cd::Geo{n, c, hw, hw, o, k, k, oh, oh, 1, s, s, p, p, 1, 1};
}

}  // namespace

TEST(ConvLayouts, EveryLayoutMatchesTheDoubleLoops) {
  Guard guard;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (cd::Layout l : {cd::Layout::Plain, cd::Layout::Blocked, cd::Layout::Auto}) {
      cd::set_layout(l);
      for (const Case& k : kCases)
        check_all_passes(k, "layout " + std::to_string(int(l)) + " threads " + std::to_string(threads));
    }
  }
}

TEST(ConvLayouts, BlockedReallyReorders) {
  Guard guard;
  set_num_threads(1);
  cd::set_layout(cd::Layout::Blocked);
  // Without this the test above could pass on plain primitives only.
  EXPECT_EQ(cd::describe(cd::Pass::Fwd, geo(4, 16, 12, 24, 3, 1, 1)).rfind("blocked ", 0), 0u);
  cd::set_layout(cd::Layout::Plain);
  EXPECT_EQ(cd::describe(cd::Pass::Fwd, geo(4, 16, 12, 24, 3, 1, 1)).rfind("plain ", 0), 0u);
}

TEST(ConvLayouts, RulePicksPerShape) {
  Guard guard;
  set_num_threads(1);
  using P = cd::Pass;
  const cd::Geo big = geo(8, 16, 8, 16, 3, 1, 1), stem = geo(8, 3, 16, 16, 3, 1, 1), one = geo(16, 1, 16, 32, 4, 2, 1);
  for (P p : {P::Fwd, P::BwdData, P::BwdWeights}) EXPECT_TRUE(cd::use_blocked(p, big));
  // 3 input channels: forward and weight gradient blocked, input gradient plain.
  EXPECT_TRUE(cd::use_blocked(P::Fwd, stem));
  EXPECT_FALSE(cd::use_blocked(P::BwdData, stem));
  EXPECT_TRUE(cd::use_blocked(P::BwdWeights, stem));
  // 1 input channel: the weight gradient stays plain too.
  EXPECT_TRUE(cd::use_blocked(P::Fwd, one));
  EXPECT_FALSE(cd::use_blocked(P::BwdWeights, one));
  // 1x1 kernels and tiny calls stay plain.
  for (P p : {P::Fwd, P::BwdData, P::BwdWeights}) {
    EXPECT_FALSE(cd::use_blocked(p, geo(16, 64, 16, 64, 1, 1, 0)));
    EXPECT_FALSE(cd::use_blocked(p, geo(2, 8, 4, 8, 3, 1, 1)));
  }
  EXPECT_EQ(cd::describe(P::Fwd, big).rfind("blocked jit", 0), 0u) << cd::describe(P::Fwd, big);
  EXPECT_EQ(cd::describe(P::BwdData, stem).rfind("plain ", 0), 0u) << cd::describe(P::BwdData, stem);
}

// Any reuse of reordered weights must notice an in-place change: the second call has to see the
// new values (a stale reorder would give the first call's result).
TEST(ConvLayouts, WeightChangedInPlaceIsNotServedStale) {
  Guard guard;
  cd::set_layout(cd::Layout::Blocked);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    manual_seed(5);
    Tensor x = randn({4, 16, 10, 10}), w = randn({24, 16, 3, 3}), gy = randn({4, 24, 10, 10});
    Tensor y1 = conv2d(x, w, {}, 1, 1);
    Tensor gx1 = conv2d_backward_input(gy, w, x.shape(), {1, 1}, {1, 1}, {1, 1}, 1);
    {
      NoGradGuard ng;
      w.mul_(-2.0);  // in place: same storage, new values
    }
    Tensor y2 = conv2d(x, w, {}, 1, 1);
    Tensor gx2 = conv2d_backward_input(gy, w, x.shape(), {1, 1}, {1, 1}, {1, 1}, 1);
    expect_close(y2, conv2d(x.to(DType::Float64), w.to(DType::Float64), {}, 1, 1), "forward after w.mul_");
    expect_close(gx2, conv2d_backward_input(gy.to(DType::Float64), w.to(DType::Float64), x.shape(), {1, 1}, {1, 1},
                                            {1, 1}, 1),
                 "input grad after w.mul_");
    expect_close(y2, (y1 * -2.0).to(DType::Float64), "forward scaled");
    expect_close(gx2, (gx1 * -2.0).to(DType::Float64), "input grad scaled");
  }
}

TEST(ConvLayouts, SteadyStateCreatesNoPrimitive) {
  Guard guard;
  set_num_threads(2);
  manual_seed(1);
  Tensor x = randn({6, 16, 12, 12}).requires_grad_(), w = randn({24, 16, 3, 3}).requires_grad_();
  auto step = [&] { conv2d(x, w, {}, 1, 1).sum().backward(); };
  step();
  const size_t entries = cpu::onednn::cache_size();
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(cpu::onednn::cache_size(), entries);
}
