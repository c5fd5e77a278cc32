// Random ops: op-table rows (reference values recomputed from the raw Philox stream), seeding,
// statistics, bit-exact replay from a saved generator state, and dropout's mask reuse.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;

// After manual_seed(s), the first random call's element i is drawn from philox(s, i).
double u24(uint64_t seed, uint64_t i) { return double(philox(seed, i)[0] >> 8) / 16777216.0; }
double u53(uint64_t seed, uint64_t i) {
  auto r = philox(seed, i);
  return double(((uint64_t(r[0]) << 21) ^ uint64_t(r[1])) & ((1ull << 53) - 1)) / 9007199254740992.0;
}
double box_muller(uint64_t seed, uint64_t i) {
  auto r = philox(seed, i);
  double a = (double(r[0]) + 1.0) / 4294967297.0, b = double(r[1]) / 4294967296.0;
  return std::sqrt(-2.0 * std::log(a)) * std::cos(2.0 * M_PI * b);
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s / double(v.size());
}
double var_of(const std::vector<double>& v) {
  double m = mean_of(v), s = 0;
  for (double e : v) s += (e - m) * (e - m);
  return s / double(v.size() - 1);
}

}  // namespace

TERRA_OP_CASES(random) {
  add_case({.name = "rand/f32", .ops = {"rand"}, .inputs = {},
            .fn = [](const T&) { manual_seed(11); return rand({3, 4}); },
            .reference = [](const std::vector<V>&) { V o; for (uint64_t i = 0; i < 12; ++i) o.push_back(u24(11, i)); return o; },
            .tol = 0, .gradcheck = false});
  add_case({.name = "rand/f64", .ops = {"rand"}, .inputs = {},
            .fn = [](const T&) { manual_seed(12); return rand({5}, DType::Float64); },
            .reference = [](const std::vector<V>&) { V o; for (uint64_t i = 0; i < 5; ++i) o.push_back(u53(12, i)); return o; },
            .tol = 0, .gradcheck = false});
  add_case({.name = "randn/f64", .ops = {"randn"}, .inputs = {},
            .fn = [](const T&) { manual_seed(13); return randn({2, 3}, DType::Float64); },
            .reference = [](const std::vector<V>&) { V o; for (uint64_t i = 0; i < 6; ++i) o.push_back(box_muller(13, i)); return o; },
            .tol = 1e-12, .gradcheck = false});
  add_case({.name = "randint", .ops = {"randint"}, .inputs = {},
            .fn = [](const T&) { manual_seed(14); return randint(-3, 4, {8}); },
            .reference = [](const std::vector<V>&) {
              V o;
              for (uint64_t i = 0; i < 8; ++i) {
                auto r = philox(14, i);
                o.push_back(double(-3 + int64_t(((uint64_t(r[0]) << 32) | r[1]) % 7)));
              }
              return o; },
            .tol = 0, .gradcheck = false});
  // Probabilities 0 and 1 make the draw certain: an oracle that does not depend on the stream.
  add_case({.name = "bernoulli/certain", .ops = {"bernoulli"},
            .inputs = {{.shape = {2, 3}, .differentiable = false, .fixed = {0, 1, 1, 0, 0, 1}}},
            .fn = [](const T& x) { return bernoulli(x[0]); },
            .reference = [](const std::vector<V>& v) { return v[0]; }, .tol = 0, .gradcheck = false});
  add_case({.name = "bernoulli/stream", .ops = {"bernoulli"}, .inputs = {{{6}, DType::Float64, 0, 1, false}},
            .fn = [](const T& x) { manual_seed(15); return bernoulli(x[0]); },
            .reference = [](const std::vector<V>& v) {
              V o; for (uint64_t i = 0; i < 6; ++i) o.push_back(u53(15, i) < v[0][i] ? 1 : 0); return o; },
            .tol = 0, .gradcheck = false});
  add_case({.name = "bernoulli_p", .ops = {"bernoulli_p"}, .inputs = {},
            .fn = [](const T&) { manual_seed(16); return bernoulli({7}, 0.3, DType::Float64); },
            .reference = [](const std::vector<V>&) { V o; for (uint64_t i = 0; i < 7; ++i) o.push_back(u53(16, i) < 0.3 ? 1 : 0); return o; },
            .tol = 0, .gradcheck = false});
  // dropout = dropout_mask then mul; reseeding inside fn makes it a fixed function for gradcheck.
  add_case({.name = "dropout/train", .ops = {"dropout_mask", "mul"}, .inputs = {{{4, 5}}},
            .fn = [](const T& x) { manual_seed(17); return dropout(x[0], 0.4, true); },
            .reference = [](const std::vector<V>& v) {
              V o;
              for (uint64_t i = 0; i < 20; ++i) o.push_back(u53(17, i) < 0.4 ? 0.0 : v[0][i] / 0.6);
              return o; }});
  add_case({.name = "dropout/f32", .ops = {"dropout_mask", "mul"}, .inputs = {{{9}, DType::Float32}},
            .fn = [](const T& x) { manual_seed(18); return dropout(x[0], 0.5, true); },
            .reference = [](const std::vector<V>& v) {
              V o;
              for (uint64_t i = 0; i < 9; ++i) o.push_back(u53(18, i) < 0.5 ? 0.0 : double(float(v[0][i]) * 2.0f));
              return o; },
            .tol = 0, .gradcheck = false});
}

TEST(Random, ManualSeedReproduces) {
  manual_seed(123);
  auto a = randn({100}).to_vector<float>();
  auto b = rand({100}).to_vector<float>();
  manual_seed(123);
  EXPECT_EQ(randn({100}).to_vector<float>(), a);
  EXPECT_EQ(rand({100}).to_vector<float>(), b);
  manual_seed(124);
  EXPECT_NE(randn({100}).to_vector<float>(), a);
}

TEST(Random, ConsecutiveCallsDiffer) {
  manual_seed(1);
  EXPECT_NE(rand({50}).to_vector<float>(), rand({50}).to_vector<float>());
}

TEST(Random, RandnStatistics) {
  manual_seed(7);
  auto v = randn({100000}, DType::Float64).to_vector<double>();
  EXPECT_NEAR(mean_of(v), 0.0, 0.015);  // std error 0.0032
  EXPECT_NEAR(var_of(v), 1.0, 0.02);
  auto f = randn({100000}).to_vector<double>();
  EXPECT_NEAR(mean_of(f), 0.0, 0.015);
  EXPECT_NEAR(var_of(f), 1.0, 0.02);
}

TEST(Random, RandRangeAndMoments) {
  manual_seed(8);
  for (DType d : {DType::Float32, DType::Float64}) {
    Tensor r = rand({100000}, d);
    EXPECT_EQ(r.dtype(), d);
    auto v = r.to_vector<double>();
    for (double e : v) ASSERT_TRUE(e >= 0.0 && e < 1.0) << e;
    EXPECT_NEAR(mean_of(v), 0.5, 0.005);
    EXPECT_NEAR(var_of(v), 1.0 / 12, 0.003);
  }
}

TEST(Random, RandintBounds) {
  manual_seed(9);
  Tensor r = randint(-2, 5, {20000});
  EXPECT_EQ(r.dtype(), DType::Int64);
  std::set<int64_t> seen;
  for (int64_t e : r.to_vector<int64_t>()) {
    ASSERT_GE(e, -2);
    ASSERT_LT(e, 5);
    seen.insert(e);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_THROW(randint(3, 3, {2}), std::invalid_argument);
}

TEST(Random, BernoulliMean) {
  manual_seed(10);
  auto v = bernoulli(full({100000}, 0.3)).to_vector<double>();
  for (double e : v) ASSERT_TRUE(e == 0.0 || e == 1.0);
  EXPECT_NEAR(mean_of(v), 0.3, 0.006);
  auto w = bernoulli({100000}, 0.8).to_vector<double>();
  EXPECT_NEAR(mean_of(w), 0.8, 0.006);
  EXPECT_THROW(bernoulli(full({3}, 1.5)), std::invalid_argument);
  EXPECT_THROW(bernoulli({3}, -0.1), std::invalid_argument);
}

// A saved (seed, offset) replays the same numbers bit-exactly: what fallback re-execution relies on.
TEST(Random, ReplayFromGeneratorState) {
  manual_seed(2024);
  (void)rand({17});
  GeneratorState before = generator_state();
  auto a = randn({1000}).to_vector<float>();
  auto b = rand({33}, DType::Float64).to_vector<double>();
  auto c = randint(0, 1000, {50}).to_vector<int64_t>();
  Tensor xs = ones({64});
  manual_seed(17);
  auto d = dropout(xs, 0.5, true).to_vector<float>();

  set_generator_state(before);
  EXPECT_EQ(randn({1000}).to_vector<float>(), a);
  EXPECT_EQ(rand({33}, DType::Float64).to_vector<double>(), b);
  EXPECT_EQ(randint(0, 1000, {50}).to_vector<int64_t>(), c);
  set_generator_state({17, 0});
  EXPECT_EQ(dropout(xs, 0.5, true).to_vector<float>(), d);
  // Each call reserves exactly its element count, so the offset advances deterministically.
  set_generator_state(before);
  (void)randn({1000});
  EXPECT_EQ(generator_state().offset, before.offset + 1000);
}

TEST(Random, NumbersDependOnlyOnKeyAndIndex) {
  // The first k elements of a longer draw equal a shorter draw from the same state.
  set_generator_state({99, 5});
  auto longer = randn({500}).to_vector<float>();
  set_generator_state({99, 5});
  auto shorter = randn({10}).to_vector<float>();
  EXPECT_EQ(std::vector<float>(longer.begin(), longer.begin() + 10), shorter);
}

TEST(Dropout, MaskSharedByForwardAndBackward) {
  manual_seed(3);
  Tensor x = randn({40000}, DType::Float64).requires_grad_();
  Tensor y = dropout(x, 0.3, true);
  Tensor w = rand({40000}, DType::Float64);
  (y * w).sum().backward();
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>(), gv = x.grad().to_vector<double>(),
       wv = w.to_vector<double>();
  int64_t zeros = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0.0) {
      ++zeros;
      ASSERT_EQ(gv[i], 0.0) << i;
    } else {
      ASSERT_NEAR(yv[i], xv[i] / 0.7, 1e-12) << i;
      ASSERT_NEAR(gv[i], wv[i] / 0.7, 1e-12) << i;
    }
  }
  EXPECT_NEAR(double(zeros) / 40000.0, 0.3, 0.015);
}

TEST(Dropout, EdgeCases) {
  Tensor x = randn({10});
  EXPECT_TRUE(dropout(x, 0.5, false).same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).same(x));
  for (float e : dropout(x, 1.0, true).to_vector<float>()) EXPECT_EQ(e, 0.0f);
  EXPECT_THROW(dropout(x, 1.5, true), std::invalid_argument);
  EXPECT_THROW(dropout(x, -0.1, false), std::invalid_argument);
  try {
    dropout(x, 2.0, true);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[dropout]"), std::string::npos) << e.what();
  }
}

}  // namespace terra::testing
