// compile::run_fused against the same ops run one by one (eager): bit for bit, at odd sizes that
// cut tiles and parallel chunks mid-vector, with broadcast scalars, in-place targets and scratch
// slots, at 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
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

// Bit for bit, except that a NaN equals any NaN: x86 passes a NaN operand's sign through, and
// which operand an instruction takes first is the compiler's choice (eager's own one-thread and
// two-thread loops can disagree on it).
void expect_bits_or_nan(const Tensor& a, const Tensor& b) {
  std::vector<float> x = values(a), y = values(b);
  ASSERT_EQ(x.size(), y.size());
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::isnan(x[i]) && std::isnan(y[i])) && std::memcmp(&x[i], &y[i], sizeof(float)) != 0) bad++;
  EXPECT_EQ(bad, 0u);
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

// Every op with a float32 tile function (the register-free flat path), scalars on either side,
// an in-place target, and values that tell rounding apart (NaN, ±inf, -0, huge, tiny), at sizes
// that cut tiles and vectors; the same chain with one op lacking a tile function (log) runs the
// per-op kernel path. Both equal the ops run one by one.
TEST(FusedElementwise, TileFunctionsMatchTheKernelsBitForBit) {
  for (int threads : {1, 2}) {
    Threads tg(threads);
    for (int64_t n : {1, 9, 511, 513, 4097, 70001}) {
      manual_seed(uint64_t(n) + 7);
      std::vector<float> xs = (randn({n}) * 4.0).to_vector<float>();
      const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 3e38f, -3e38f, 1e-42f, 90.0f, -110.0f};
      for (size_t i = 0; i < xs.size() && i < 10; ++i) xs[i * 3 % xs.size()] = special[i];
      Tensor x = tensor(xs, {n}), y = randn({n}) + 0.5, s = scalar_tensor(0.75);
      for (bool with_log : {false, true}) {
        // %3 = s - x   %4 = exp(%3)   %5 = %4 * y   %6 = tanh(%5)   %7 = neg(%6)   %8 = sigmoid(%7)
        // %10 = %7 / s   %9 = relu(%10) or log(%10)   %1 += %9 (y in place)   %11 = %1 + %8
        FusedKernel k;
        k.numel = n;
        k.slot_dtype.assign(12, DType::Float32);
        k.ops = {{find_op("sub"), &kNoAttrs, {2, 0}, 3},    {find_op("exp"), &kNoAttrs, {3}, 4},
                 {find_op("mul"), &kNoAttrs, {4, 1}, 5},    {find_op("tanh"), &kNoAttrs, {5}, 6},
                 {find_op("neg"), &kNoAttrs, {6}, 7},       {find_op("sigmoid"), &kNoAttrs, {7}, 8},
                 {find_op("div"), &kNoAttrs, {7, 2}, 10},   {find_op(with_log ? "log" : "relu"), &kNoAttrs, {10}, 9},
                 {find_op("add_"), &kNoAttrs, {1, 9}, 1},   {find_op("add"), &kNoAttrs, {1, 8}, 11}};
        Tensor y_fused = y.clone();
        std::vector<Tensor> slots{x, y_fused, s, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(),
                                  Tensor(), empty({n})};
        run_fused(k, slots);
        Tensor t7 = neg(tanh(mul(exp(sub(s, x)), y)));
        Tensor q = div(t7, s);
        Tensor y_ref = y.clone();
        add_inplace(y_ref, with_log ? log(q) : relu(q));
        SCOPED_TRACE("n=" + std::to_string(n) + " threads=" + std::to_string(threads) + (with_log ? " log" : " relu"));
        expect_bits_or_nan(y_fused, y_ref);
        expect_bits_or_nan(slots[11], add(y_ref, sigmoid(t7)));
      }
    }
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
