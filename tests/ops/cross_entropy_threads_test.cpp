// The fused cross_entropy computes each row on one thread and reduces the rows in order: its loss
// and gradient must not depend on the thread count, and stay close to a double-precision sum.
#include <gtest/gtest.h>

#include <cmath>

#include <terra/terra.h>

using namespace terra;

namespace {

struct Result {
  std::vector<float> loss, grad;
};

Result run(const Shape& xs, int64_t classes, const std::string& red, int threads) {
  set_num_threads(threads);
  manual_seed(5);
  Tensor x, t;
  {
    NoGradGuard ng;
    x = randn(xs) * 4.0;
    Shape ts = xs;
    ts.erase(ts.begin() + 1);
    t = randint(0, classes, ts);
  }
  x.requires_grad_();
  Tensor loss = cross_entropy(x, t, 3, red);  // class 3 is ignored
  (red == "none" ? loss.sum() : loss).backward();
  return {loss.to_vector<float>(), x.grad().to_vector<float>()};
}

}  // namespace

TEST(CrossEntropyFused, SameBitsForAnyThreadCount) {
  const int saved = num_threads();
  // Rows of 1000 classes (many rows per thread), rows of 7 (lanes' tail only), spatial [N, C, R].
  const std::vector<std::pair<Shape, int64_t>> cases = {{{300, 1000}, 1000}, {{5000, 7}, 7}, {{16, 40, 300}, 40}};
  for (const auto& [xs, c] : cases)
    for (std::string red : {"mean", "sum", "none"}) {
      Result one = run(xs, c, red, 1);
      for (int threads : {2, 3}) {
        Result many = run(xs, c, red, threads);
        EXPECT_EQ(one.loss, many.loss) << shape_str(xs) << " " << red << " " << threads;
        EXPECT_EQ(one.grad, many.grad) << shape_str(xs) << " " << red << " " << threads;
      }
    }
  set_num_threads(saved);
}

TEST(CrossEntropyFused, MeanMatchesADoubleReference) {
  manual_seed(9);
  const int64_t n = 64, c = 333;
  Tensor x = randn({n, c}) * 6.0, t = randint(0, c, {n});
  std::vector<float> xv = x.to_vector<float>();
  std::vector<int64_t> tv = t.to_vector<int64_t>();
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; ++j) m = std::max(m, double(xv[size_t(i * c + j)]));
    for (int64_t j = 0; j < c; ++j) s += std::exp(double(xv[size_t(i * c + j)]) - m);
    want += m + std::log(s) - double(xv[size_t(i * c + tv[size_t(i)])]);
  }
  want /= double(n);
  EXPECT_NEAR(cross_entropy(x, t).item<float>(), want, 2e-6 * std::fabs(want));
}
