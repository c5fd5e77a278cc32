// Bad input to elementwise, activation, comparison and statistics ops: a std::invalid_argument whose
// message starts with "[opname]" and names the shapes, and the next op call still works.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include <terra/terra.h>

namespace terra {
namespace {

// Expects `f` to throw E (std::invalid_argument by default; std::out_of_range for a dim out of range,
// as torch's IndexError) starting with `prefix` and containing each of `parts`.
template <class E = std::invalid_argument>
void expect_error(const std::function<void()>& f, const std::string& prefix, std::vector<std::string> parts = {}) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected " << prefix;
  } catch (const E& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind(prefix, 0), 0u) << "message: " << m;
    for (auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "message lacks '" << p << "': " << m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
  // The runtime stays usable after the throw.
  Tensor ok = relu(tensor({-1.f, 2.f}, {2})) + maximum(ones({2}), zeros({2}));
  EXPECT_EQ(ok.to_vector<float>(), (std::vector<float>{1.f, 3.f}));
}

TEST(ElementwiseErrors, ShapeMismatch) {
  Tensor a = ones({2, 3}), b = ones({4, 3});
  expect_error([&] { pow(a, b); }, "[pow]", {"[2, 3]", "[4, 3]"});
  expect_error([&] { maximum(a, b); }, "[maximum]", {"[2, 3]", "[4, 3]"});
  expect_error([&] { minimum(a, b); }, "[minimum]", {"[2, 3]", "[4, 3]"});
  expect_error([&] { eq(a, b); }, "[eq]", {"[2, 3]", "[4, 3]"});
  expect_error([&] { (void)(a < b); }, "[lt]", {"[2, 3]", "[4, 3]"});
  expect_error([&] { (void)(a >= b); }, "[ge]", {"[2, 3]", "[4, 3]"});
  expect_error([&] { logical_and(a, b); }, "[logical_and]", {"[2, 3]", "[4, 3]"});
  expect_error([&] { where(gt(a, 0.0), a, b); }, "[where]", {"[2, 3]", "[4, 3]"});
  expect_error([&] { where(ones({5}, DType::Bool), a, a); }, "[where]", {"[5]", "[2, 3]"});
  expect_error([&] { masked_fill(a, ones({4, 3}, DType::Bool), 0.0); }, "[masked_fill]", {"[4, 3]", "[2, 3]"});
  // A mask that broadcasts only by growing the input is rejected too.
  expect_error([&] { masked_fill(ones({3}), ones({2, 3}, DType::Bool), 0.0); }, "[masked_fill]", {"[2, 3]", "[3]"});
  expect_error([&] { gelu_backward(ones({2}), ones({3})); }, "[gelu_backward]", {"[2]", "[3]"});
}

TEST(ElementwiseErrors, WrongDTypeForMaskOrCondition) {
  Tensor x = ones({2, 2});
  expect_error([&] { where(arange(4).reshape({2, 2}), x, x); }, "[where] condition must be bool, got int64 of shape [2, 2]");
  expect_error([&] { where(x, x, 0.0); }, "[where] condition must be bool, got float32 of shape [2, 2]");
  expect_error([&] { masked_fill(x, ones({2}), 1.0); }, "[masked_fill] mask must be bool", {"float32", "[2]"});
  expect_error([&] { relu(ones({3}, DType::Bool)); }, "[relu]", {"bool", "[3]"});
  expect_error([&] { abs(ones({3}, DType::Bool)); }, "[abs]", {"bool", "[3]"});
  expect_error([&] { var(arange(6).reshape({2, 3})); }, "[var]", {"int64", "[2, 3]"});
  expect_error([&] { clamp(x, std::nullopt, std::nullopt); }, "[clamp]", {"[2, 2]"});
  expect_error([&] { softplus(x, 0.0); }, "[softplus]", {"[2, 2]"});
}

TEST(ElementwiseErrors, BadReductionDims) {
  Tensor x = ones({2, 3});
  using std::out_of_range;
  expect_error<out_of_range>([&] { max(x, 2); }, "[max]", {"dim 2", "rank 2", "[-2, 1]"});
  expect_error<out_of_range>([&] { min(x, -3); }, "[min]", {"dim -3", "rank 2"});
  expect_error<out_of_range>([&] { argmax(x, 5); }, "[argmax]", {"dim 5"});
  expect_error<out_of_range>([&] { argmin(x, -4, true); }, "[argmin]", {"dim -4"});
  expect_error([&] { var(x, {0, 0}); }, "[var]", {"[0, 0]"});  // a repeated dim is a bad value, not an index
  expect_error<out_of_range>([&] { var(x, {2}); }, "[var]", {"dim 2"});
  expect_error<out_of_range>([&] { std_(x, {-3}); }, "[var]", {"dim -3"});
  Tensor e = ones({2, 0});
  expect_error([&] { max(e); }, "[max]", {"[2, 0]"});
  expect_error([&] { min(e); }, "[min]", {"[2, 0]"});
  expect_error([&] { max(e, 1); }, "[max]", {"[2, 0]"});
  expect_error([&] { argmax(e); }, "[argmax]", {"[2, 0]"});
  expect_error([&] { argmin(e, 1); }, "[argmin]", {"[2, 0]"});
  // Reducing the non-empty dim of an empty tensor is fine (empty result).
  EXPECT_EQ(max(e, 0).shape(), (Shape{0}));
}

TEST(ElementwiseErrors, UndefinedInput) {
  Tensor u, x = ones({2});
  expect_error([&] { pow(u, x); }, "[pow]");
  expect_error([&] { pow(x, u); }, "[pow]");
  expect_error([&] { pow(u, 2.0); }, "[pow]");
  expect_error([&] { sqrt(u); }, "[sqrt]");
  expect_error([&] { rsqrt(u); }, "[rsqrt]");
  expect_error([&] { exp(u); }, "[exp]");
  expect_error([&] { log(u); }, "[log]");
  expect_error([&] { abs(u); }, "[abs]");
  expect_error([&] { sign(u); }, "[sign]");
  expect_error([&] { clamp(u, 0.0, 1.0); }, "[clamp]");
  expect_error([&] { maximum(u, x); }, "[maximum]");
  expect_error([&] { minimum(x, u); }, "[minimum]");
  expect_error([&] { eq(u, x); }, "[eq]");
  expect_error([&] { ne(x, u); }, "[ne]");
  expect_error([&] { lt(u, 1.0); }, "[lt]");
  expect_error([&] { (void)(u <= x); }, "[le]");
  expect_error([&] { (void)(u > 0.0); }, "[gt]");
  expect_error([&] { ge(u, x); }, "[ge]");
  expect_error([&] { logical_not(u); }, "[logical_not]");
  expect_error([&] { logical_and(u, x); }, "[logical_and]");
  expect_error([&] { logical_or(x, u); }, "[logical_or]");
  expect_error([&] { where(u, x, x); }, "[where]");
  expect_error([&] { where(gt(x, 0.0), u, x); }, "[where]");
  expect_error([&] { where(gt(x, 0.0), x, u); }, "[where]");
  expect_error([&] { where(gt(x, 0.0), u, 0.0); }, "[where]");
  expect_error([&] { masked_fill(u, gt(x, 0.0), 1.0); }, "[masked_fill]");
  expect_error([&] { masked_fill(x, u, 1.0); }, "[masked_fill]");
  expect_error([&] { relu(u); }, "[relu]");
  expect_error([&] { leaky_relu(u); }, "[leaky_relu]");
  expect_error([&] { gelu(u); }, "[gelu]");
  expect_error([&] { gelu_backward(u, x); }, "[gelu_backward]");
  expect_error([&] { sigmoid(u); }, "[sigmoid]");
  expect_error([&] { tanh(u); }, "[tanh]");
  expect_error([&] { softplus(u); }, "[softplus]");
  expect_error([&] { max(u); }, "[max]");
  expect_error([&] { min(u, 0); }, "[min]");
  expect_error([&] { argmax(u); }, "[argmax]");
  expect_error([&] { argmin(u, 0); }, "[argmin]");
  expect_error([&] { var(u); }, "[var]");
  expect_error([&] { std_(u); }, "[std_]");
}

// Shape errors come from inference, so they are the same under autograd and leave no history behind.
TEST(ElementwiseErrors, ErrorsWithGradDoNotPoisonLaterBackward) {
  Tensor a = ones({2, 3}).requires_grad_();
  expect_error([&] { maximum(a, ones({4})); }, "[maximum]", {"[2, 3]", "[4]"});
  Tensor y = (sigmoid(a) * 2.0).sum();
  y.backward();
  double s = 1 / (1 + std::exp(-1.0));
  for (double g : a.grad().to_vector<double>()) EXPECT_NEAR(g, 2 * s * (1 - s), 1e-6);
}

}  // namespace
}  // namespace terra

namespace terra {
namespace {
// masked_fill with -inf (attention masks) and its gradient: filled positions get none.
TEST(ElementwiseErrors, MaskedFillInfinityAndGrad) {
  Tensor x = tensor_f64({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor m = tensor_bool({true, false}, {2});
  Tensor y = masked_fill(x, m, -INFINITY);
  auto v = y.to_vector<double>();
  EXPECT_TRUE(std::isinf(v[0]) && v[0] < 0);
  EXPECT_EQ(v[1], 2);
  (masked_fill(x, m, 0.0) * 3.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 3, 0, 3}));
}
}  // namespace
}  // namespace terra
