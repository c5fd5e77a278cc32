#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "ops/op_table.h"

namespace terra::testing {

static std::vector<OpCase>& cases() {
  static std::vector<OpCase> c;
  return c;
}
void add_case(OpCase c) { cases().push_back(std::move(c)); }
const std::vector<OpCase>& all_cases() { return cases(); }

Values make_values(const Input& in, uint64_t seed) {
  if (!in.fixed.empty()) return in.fixed;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(in.lo, in.hi);
  Values v(size_t(numel_of(in.shape)));
  for (auto& x : v) {
    x = u(rng);
    if (in.dtype == DType::Int64) x = std::floor(x);
    if (in.dtype == DType::Bool) x = x > 0.5 * (in.lo + in.hi) ? 1 : 0;
  }
  return v;
}

Tensor make_tensor(const Input& in, const Values& v) {
  switch (in.dtype) {
    case DType::Float64: return tensor_f64(v, in.shape);
    case DType::Float32: return tensor(std::vector<float>(v.begin(), v.end()), in.shape);
    case DType::Int64: return tensor(std::vector<int64_t>(v.begin(), v.end()), in.shape);
    case DType::Bool: {
      std::vector<bool> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = v[i] != 0;
      return tensor_bool(b, in.shape);
    }
  }
  return {};
}

static uint64_t seed_of(const std::string& s, size_t k) { return std::hash<std::string>{}(s) ^ (k * 7919); }

class OpTable : public ::testing::TestWithParam<size_t> {};

TEST_P(OpTable, ForwardMatchesReference) {
  const OpCase& c = all_cases()[GetParam()];
  if (!c.reference) GTEST_SKIP() << "gradcheck-only row";
  std::vector<Values> vals;
  std::vector<Tensor> ts;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    vals.push_back(make_values(c.inputs[k], seed_of(c.name, k)));
    ts.push_back(make_tensor(c.inputs[k], vals.back()));
  }
  Tensor out = c.fn(ts);
  Values got = out.to_vector<double>();
  Values want = c.reference(vals);
  ASSERT_EQ(got.size(), want.size()) << c.name;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << c.name << " element " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], c.tol * std::max(1.0, std::fabs(want[i]))) << c.name << " element " << i;
  }
}

TEST_P(OpTable, GradientMatchesFiniteDifferences) {
  const OpCase& c = all_cases()[GetParam()];
  if (!c.gradcheck) GTEST_SKIP() << "not differentiable";
  std::vector<Values> vals;
  for (size_t k = 0; k < c.inputs.size(); ++k) vals.push_back(make_values(c.inputs[k], seed_of(c.name, k)));
  auto build = [&](const std::vector<Values>& v, bool grad) {
    std::vector<Tensor> ts;
    for (size_t k = 0; k < c.inputs.size(); ++k) {
      Tensor t = make_tensor(c.inputs[k], v[k]);
      if (grad && c.inputs[k].differentiable && is_floating(c.inputs[k].dtype)) t.requires_grad_();
      ts.push_back(t);
    }
    return ts;
  };
  // Project the output on fixed random weights so every output element contributes.
  std::vector<Tensor> ts = build(vals, true);
  Tensor out = c.fn(ts);
  ASSERT_EQ(out.dtype(), DType::Float64) << c.name << ": gradcheck rows must run in float64";
  Values w = make_values(Input{out.shape(), DType::Float64, -1, 1}, 99);
  Tensor wt = tensor_f64(w, out.shape());
  (out * wt).sum().backward();
  auto objective = [&](const std::vector<Values>& v) {
    NoGradGuard ng;
    Values o = c.fn(build(v, false)).to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += o[i] * w[i];
    return s;
  };
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    if (!c.inputs[k].differentiable || !is_floating(c.inputs[k].dtype)) continue;
    Tensor g = ts[k].grad();
    Values analytic = g.defined() ? g.to_vector<double>() : Values(vals[k].size(), 0.0);
    for (size_t i = 0; i < vals[k].size(); ++i) {
      auto plus = vals, minus = vals;
      plus[k][i] += c.eps;
      minus[k][i] -= c.eps;
      double numeric = (objective(plus) - objective(minus)) / (2 * c.eps);
      EXPECT_NEAR(analytic[i], numeric, c.grad_tol * std::max(1.0, std::fabs(numeric)))
          << c.name << " input " << k << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, OpTable, ::testing::Range<size_t>(0, all_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           std::string n = all_cases()[i.param].name;
                           for (auto& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n + "_" + std::to_string(i.param);
                         });

// Every registered op must be exercised by some row (views and in-place forms included).
TEST(OpTableCoverage, EveryRegisteredOpHasARow) {
  std::set<std::string> covered;
  for (auto& c : all_cases())
    for (auto& o : c.ops) covered.insert(o);
  for (const OpDef* op : all_ops()) EXPECT_TRUE(covered.count(op->name)) << "no op-table row exercises '" << op->name << "'";
}

}  // namespace terra::testing
