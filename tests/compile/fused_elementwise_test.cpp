// compile::run_fused against the same ops run one by one (eager): bit for bit, at odd sizes that
// cut tiles and parallel chunks mid-vector, with broadcast scalars, in-place targets and scratch
// slots, at 1 and 2 threads.
#include <gtest/gtest.h>

#include <cstring>

#include <terra/terra.h>

#include "terra/compile/fused_elementwise.h"

namespace terra::compile {
namespace {

const Attrs kNoAttrs;

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }
void expect_bits(const Tensor& a, const Tensor& b) {
  std::vector<float> x = values(a), y = values(b);
  ASSERT_EQ(x.size(), y.size());
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0);
}

struct Threads {
  int old = num_threads();
  explicit Threads(int n) { set_num_threads(n); }
  ~Threads() { set_num_threads(old); }
};

TEST(FusedElementwise, EveryUnaryOpMatchesEagerBitForBit) {
  const char* unary[] = {"exp", "log", "sqrt", "rsqrt", "abs", "sign", "relu", "sigmoid", "tanh", "neg"};
  for (int threads : {1, 2}) {
    Threads tg(threads);
    for (int64_t n : {1, 7, 2049, 70001}) {
      manual_seed(uint64_t(n));
      Tensor x = rand({n}) * 3.0 + 0.01;  // positive: log and sqrt stay finite
      for (const char* name : unary) {
        // slot 0: x; slot 1: op(x) (scratch); slot 2: op(x) * x (written out)
        FusedKernel k;
        k.numel = n;
        k.slot_dtype = {DType::Float32, DType::Float32, DType::Float32};
        k.ops.push_back({find_op(name), &kNoAttrs, {0}, 1});
        k.ops.push_back({find_op("mul"), &kNoAttrs, {1, 0}, 2});
        std::vector<Tensor> slots{x, Tensor(), empty({n})};
        run_fused(k, slots);
        Tensor one = empty({n});
        std::vector<Tensor> in{x}, out{one};
        find_op(name)->kernel(KernelArgs{in, out, kNoAttrs, PhiloxKey{}});
        SCOPED_TRACE(std::string(name) + " n=" + std::to_string(n) + " threads=" + std::to_string(threads));
        expect_bits(slots[2], mul(one, x));
      }
    }
  }
}

// An optimizer-like chain: scalars broadcast, two tensors updated in place, the rest in tiles.
TEST(FusedElementwise, InPlaceUpdatesWithScalarsMatchTheUnfusedChain) {
  for (int threads : {1, 2}) {
    Threads tg(threads);
    const int64_t n = 40000;
    manual_seed(3);
    Tensor g = randn({n}), m0 = randn({n}), p0 = randn({n});
    Tensor b1 = scalar_tensor(0.9), c1 = scalar_tensor(0.1), lr = scalar_tensor(-0.01);
    // unfused: m = m*b1 + g*c1; p += tanh(m) * lr
    Tensor m_ref = m0.clone(), p_ref = p0.clone();
    m_ref.mul_(b1);
    add_inplace(m_ref, g * c1);
    add_inplace(p_ref, tanh(m_ref) * lr);

    Tensor m = m0.clone(), p = p0.clone();
    // slots: 0 m, 1 b1, 2 g, 3 c1, 4 g*c1, 5 tanh, 6 lr, 7 *lr, 8 p
    FusedKernel k;
    k.numel = n;
    k.slot_dtype.assign(9, DType::Float32);
    k.ops = {{find_op("mul_"), &kNoAttrs, {0, 1}, 0}, {find_op("mul"), &kNoAttrs, {2, 3}, 4},
             {find_op("add_"), &kNoAttrs, {0, 4}, 0}, {find_op("tanh"), &kNoAttrs, {0}, 5},
             {find_op("mul"), &kNoAttrs, {5, 6}, 7}, {find_op("add_"), &kNoAttrs, {8, 7}, 8}};
    std::vector<Tensor> slots{m, b1, g, c1, Tensor(), Tensor(), lr, Tensor(), p};
    run_fused(k, slots);
    expect_bits(m, m_ref);
    expect_bits(p, p_ref);
  }
}

TEST(FusedElementwise, FusibleOpsAreElementwiseAndDeterministic) {
  EXPECT_TRUE(fusible_elementwise(*find_op("add")));
  EXPECT_TRUE(fusible_elementwise(*find_op("mul_")));
  EXPECT_FALSE(fusible_elementwise(*find_op("matmul")));   // not elementwise
  EXPECT_FALSE(fusible_elementwise(*find_op("dropout_mask")));  // draws random numbers
  EXPECT_FALSE(fusible_elementwise(*find_op("sum")));      // a reduction
  EXPECT_TRUE(fusible_elementwise(*find_op("div"), DType::Float32));
  EXPECT_FALSE(fusible_elementwise(*find_op("div"), DType::Int64));  // checks its divisor for zeros
}

}  // namespace
}  // namespace terra::compile
