// Bad inputs to the NN ops: std::invalid_argument naming the op and the shapes, thrown before any
// work, leaving everything usable. Plus batch_norm's running-statistics update, checked by hand.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>

#include <terra/terra.h>

namespace terra {
namespace {

// Runs f, expects std::invalid_argument whose message starts with `prefix` and contains `part`.
template <class F>
void expect_invalid(F&& f, const std::string& prefix, const std::string& part = "") {
  try {
    f();
    ADD_FAILURE() << "expected std::invalid_argument starting with " << prefix;
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind(prefix, 0), 0u) << m;
    if (!part.empty()) EXPECT_NE(m.find(part), std::string::npos) << "'" << m << "' lacks '" << part << "'";
  }
}

TEST(NNErrors, Conv2d) {
  Tensor x = zeros({2, 3, 8, 8}), w = zeros({4, 5, 3, 3});
  expect_invalid([&] { conv2d(x, w); },
                 "[conv2d] input of shape [2, 3, 8, 8] has 3 channels but weight of shape [4, 5, 3, 3] expects 5 (groups=1)");
  expect_invalid([&] { conv2d(zeros({3, 8, 8}), zeros({4, 3, 3, 3})); }, "[conv2d]", "[3, 8, 8]");
  expect_invalid([&] { conv2d(x, zeros({4, 3, 3})); }, "[conv2d]", "[4, 3, 3]");
  expect_invalid([&] { conv2d(zeros({1, 1, 2, 2}), zeros({1, 1, 5, 5})); }, "[conv2d] kernel", "larger than the padded input");
  expect_invalid([&] { conv2d(zeros({1, 1, 2, 2}), zeros({1, 1, 3, 3}), {}, {1, 1}, {0, 0}, {2, 2}); }, "[conv2d] kernel",
                 "[1, 1, 2, 2]");
  expect_invalid([&] { conv2d(x, Tensor()); }, "[conv2d] weight is undefined");
  expect_invalid([&] { conv2d(Tensor(), w); }, "[conv2d] input is undefined");
  expect_invalid([&] { conv2d(x, zeros({4, 3, 3, 3}), zeros({5})); }, "[conv2d] bias of shape [5]");
  expect_invalid([&] { conv2d(x, zeros({4, 3, 3, 3}, DType::Float64)); }, "[conv2d]", "dtype");
  expect_invalid([&] { conv2d(zeros({2, 4, 8, 8}), zeros({3, 2, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 2); }, "[conv2d]",
                 "not divisible by groups=2");
  expect_invalid([&] { conv2d(x, zeros({4, 3, 3, 3}), {}, {0, 1}); }, "[conv2d] stride must be positive");
  expect_invalid([&] { conv2d(x, zeros({4, 3, 3, 3}), {}, {1, 1}, {-1, 0}); }, "[conv2d] padding must be non-negative");
  expect_invalid([&] { conv2d(zeros({2, 3, 8, 8}, DType::Int64), zeros({4, 3, 3, 3}, DType::Int64)); }, "[conv2d]",
                 "float32 or float64");
}

TEST(NNErrors, ConvBackwardOps) {
  expect_invalid([&] { conv2d_backward_input(zeros({2, 4, 5, 5}), zeros({4, 3, 3, 3}), {2, 3, 8, 8}, {1, 1}, {0, 0}, {1, 1}, 1); },
                 "[conv2d_backward_input] output gradient of shape [2, 4, 5, 5]", "[2, 4, 6, 6]");
  expect_invalid([&] { conv2d_backward_weight(zeros({2, 4, 6, 6}), zeros({2, 3, 8, 8}), {4, 2, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1); },
                 "[conv2d_backward_weight]", "[4, 2, 3, 3]");
}

TEST(NNErrors, ConvTranspose2d) {
  expect_invalid([&] { conv_transpose2d(zeros({2, 3, 4, 4}), zeros({4, 2, 3, 3})); },
                 "[conv_transpose2d] input of shape [2, 3, 4, 4] has 3 channels but weight of shape [4, 2, 3, 3] expects 4");
  expect_invalid([&] { conv_transpose2d(zeros({2, 4, 4, 4}), zeros({4, 2, 3, 3}), {}, {2, 2}, {0, 0}, {2, 0}); },
                 "[conv_transpose2d] output_padding [2, 0]", "stride [2, 2]");
  expect_invalid([&] { conv_transpose2d(zeros({2, 4, 1, 1}), zeros({4, 2, 1, 1}), {}, {1, 1}, {1, 1}); },
                 "[conv_transpose2d] output size", "not positive");
  expect_invalid([&] { conv_transpose2d(zeros({2, 4, 4, 4}), zeros({4, 2, 3, 3}), zeros({3})); },
                 "[conv_transpose2d] bias of shape [3]");
  expect_invalid([&] { conv_transpose2d(zeros({4, 4, 4}), zeros({4, 2, 3, 3})); }, "[conv_transpose2d]", "[4, 4, 4]");
}

TEST(NNErrors, Pooling) {
  Tensor x = zeros({2, 3, 4, 4});
  expect_invalid([&] { max_pool2d(zeros({3, 4, 4}), 2, 2); }, "[max_pool2d] input must be 4-D", "[3, 4, 4]");
  expect_invalid([&] { max_pool2d(x, 5, 1); }, "[max_pool2d] kernel [5, 5] is larger than the padded input", "[2, 3, 4, 4]");
  expect_invalid([&] { max_pool2d(x, Int2{2, 2}, Int2{2, 2}, Int2{2, 0}); }, "[max_pool2d] padding [2, 0]", "half");
  expect_invalid([&] { max_pool2d(Tensor(), 2, 2); }, "[max_pool2d] input is undefined");
  expect_invalid([&] { avg_pool2d(x, Int2{2, 2}, Int2{-1, 2}); }, "[avg_pool2d]", "positive");
  expect_invalid([&] { avg_pool2d(zeros({2, 3, 4, 4}, DType::Int64), 2, 2); }, "[avg_pool2d]", "float32 or float64");
  expect_invalid([&] { adaptive_avg_pool2d(x, {0, 2}); }, "[adaptive_avg_pool2d] output_size [0, 2]");
  expect_invalid([&] { adaptive_avg_pool2d(zeros({4, 4}), {2, 2}); }, "[adaptive_avg_pool2d]", "[4, 4]");
  expect_invalid([&] { upsample_nearest2d(zeros({3, 4, 4}), Int2{8, 8}); }, "[upsample_nearest2d]", "[3, 4, 4]");
  expect_invalid([&] { upsample_nearest2d(x, -1.0); }, "[upsample_nearest2d] scale_factor");
  expect_invalid([&] { max_pool2d_backward(zeros({2, 3, 2, 2}), zeros({2, 3, 2, 2}), {2, 3, 4, 4}); },
                 "[max_pool2d_backward] indices must be int64");
  expect_invalid([&] { avg_pool2d_backward(zeros({2, 3, 3, 3}), {2, 3, 4, 4}, {2, 2}, {2, 2}, {0, 0}, true); },
                 "[avg_pool2d_backward] output gradient of shape [2, 3, 3, 3]", "[2, 3, 2, 2]");
}

TEST(NNErrors, Norms) {
  Tensor x = zeros({2, 3, 4, 4});
  expect_invalid([&] { batch_norm(x, zeros({4}), {}, {}, {}, true); },
                 "[batch_norm] weight of shape [4] does not match input of shape [2, 3, 4, 4]");
  expect_invalid([&] { batch_norm(zeros({3}), {}, {}, {}, {}, true); }, "[batch_norm]", "[3]");
  expect_invalid([&] { batch_norm(zeros({1, 3}), {}, {}, {}, {}, true); }, "[batch_norm] expected more than 1 value",
                 "[1, 3]");
  expect_invalid([&] { batch_norm(x, {}, {}, zeros({3}), {}, true); }, "[batch_norm] running_mean and running_var");
  expect_invalid([&] { batch_norm(x, {}, {}, zeros({2}), ones({2}), false); }, "[batch_norm] running_mean of shape [2]");
  expect_invalid([&] { batch_norm(x, {}, {}, zeros({2}), ones({2}), true); }, "[batch_norm] running_mean of shape [2]");
  expect_invalid([&] { batch_norm(Tensor(), {}, {}, {}, {}, true); }, "[batch_norm] input is undefined");
  expect_invalid([&] { layer_norm(x, {3, 4}); }, "[layer_norm] normalized_shape [3, 4]", "[2, 3, 4, 4]");
  expect_invalid([&] { layer_norm(x, {4}, zeros({5})); }, "[layer_norm] weight of shape [5]", "[4]");
  expect_invalid([&] { layer_norm(x, {}); }, "[layer_norm] normalized_shape must not be empty");
  expect_invalid([&] { layer_norm(x, {4}, zeros({4}, DType::Float64)); }, "[layer_norm] weight has dtype");
}

TEST(NNErrors, Linear) {
  expect_invalid([&] { linear(zeros({2, 3}), zeros({4, 5})); },
                 "[linear] input of shape [2, 3] has 3 features but weight of shape [4, 5] expects 5");
  expect_invalid([&] { linear(zeros({2, 3}), zeros({4, 3, 1})); }, "[linear] weight must be 2-D", "[4, 3, 1]");
  expect_invalid([&] { linear(zeros({2, 3}), zeros({4, 3}), zeros({3})); }, "[linear] bias of shape [3]");
  expect_invalid([&] { linear(Tensor(), zeros({4, 3})); }, "[linear] input is undefined");
}

// After a string of rejected calls, the same ops still run and give right answers.
TEST(NNErrors, UsableAfterErrors) {
  for (int i = 0; i < 3; ++i) {
    EXPECT_THROW(conv2d(zeros({2, 3, 8, 8}), zeros({4, 5, 3, 3})), std::invalid_argument);
    EXPECT_THROW(max_pool2d(zeros({2, 3, 2, 2}), 3, 1), std::invalid_argument);
  }
  Tensor x = ones({1, 2, 4, 4}).requires_grad_(), w = ones({3, 2, 3, 3}).requires_grad_();
  Tensor y = conv2d(x, w, {}, 1, 1);
  EXPECT_EQ(y.shape(), (Shape{1, 3, 4, 4}));
  std::vector<float> v = y.to_vector<float>();
  EXPECT_FLOAT_EQ(v[0], 8.f);   // corner: 2 channels x 2x2 window
  EXPECT_FLOAT_EQ(v[5], 18.f);  // interior: 2 channels x 3x3
  max_pool2d(y, 2, 2).sum().backward();
  EXPECT_EQ(x.grad().shape(), (Shape{1, 2, 4, 4}));
  EXPECT_EQ(w.grad().shape(), (Shape{3, 2, 3, 3}));
}

// One training call: running stats move by momentum towards the batch mean and the unbiased var.
TEST(NNOps, BatchNormRunningStatsUpdate) {
  std::vector<double> xs(2 * 2 * 3);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(double(i) * 1.7) * 3 + double(i % 4);
  for (DType dt : {DType::Float64, DType::Float32}) {
    Tensor x = tensor_f64(xs, {2, 2, 3}).to(dt);
    Tensor rm = full({2}, 0.5, dt), rv = full({2}, 2.0, dt);
    const double m = 0.25;
    Tensor y = batch_norm(x, {}, {}, rm, rv, true, m, 1e-5);
    std::vector<double> got_m = rm.to_vector<double>(), got_v = rv.to_vector<double>();
    for (int c = 0; c < 2; ++c) {
      double mean = 0, var = 0;
      for (int n = 0; n < 2; ++n)
        for (int s = 0; s < 3; ++s) mean += xs[size_t((n * 2 + c) * 3 + s)];
      mean /= 6;
      for (int n = 0; n < 2; ++n)
        for (int s = 0; s < 3; ++s) var += std::pow(xs[size_t((n * 2 + c) * 3 + s)] - mean, 2);
      double unbiased = var / 5;
      double tol = dt == DType::Float32 ? 1e-5 : 1e-12;
      EXPECT_NEAR(got_m[size_t(c)], 0.5 * (1 - m) + mean * m, tol) << "channel " << c;
      EXPECT_NEAR(got_v[size_t(c)], 2.0 * (1 - m) + unbiased * m, tol * 10) << "channel " << c;
    }
    // Eval afterwards uses the updated running statistics.
    Tensor ye = batch_norm(x, {}, {}, rm, rv, false);
    std::vector<double> yv = ye.to_vector<double>();
    EXPECT_NEAR(yv[0], (xs[0] - got_m[0]) / std::sqrt(got_v[0] + 1e-5), 1e-5);
    // Without running stats, eval falls back to batch statistics (as torch).
    Tensor yb = batch_norm(x, {}, {}, {}, {}, false);
    EXPECT_NEAR(yb.to_vector<double>()[0], y.to_vector<double>()[0], 1e-6);
  }
}

TEST(NNOps, PrimitiveCacheReused) {
  Tensor x = ones({1, 2, 6, 6}), w = ones({2, 2, 3, 3});
  Tensor a = conv2d(x, w), b = conv2d(x, w);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

}  // namespace
}  // namespace terra

namespace terra {
namespace {

// The GraphRunner runs kernels on a second thread: cached oneDNN primitives (user scratchpad,
// per-thread stream) must give the same results when two threads run them at once.
TEST(NNOps, ConcurrentOneDnnKernelsOnTwoThreads) {
  Tensor x = rand({4, 3, 12, 12}), w = rand({5, 3, 3, 3}), b = rand({5});
  Tensor want = conv2d(x, w, b, 1, 1);
  Tensor want_p = avg_pool2d(want, 2, 2);
  std::vector<float> wv = want.to_vector<float>(), wp = want_p.to_vector<float>();
  std::atomic<int> bad{0};
  auto work = [&] {
    for (int i = 0; i < 20; ++i) {
      Tensor y = conv2d(x, w, b, 1, 1);
      if (y.to_vector<float>() != wv) bad++;
      if (avg_pool2d(y, 2, 2).to_vector<float>() != wp) bad++;
      Tensor gy = ones(y.shape());
      conv2d_backward_input(gy, w, x.shape(), {1, 1}, {1, 1}, {1, 1}, 1);
      conv2d_backward_weight(gy, x, w.shape(), {1, 1}, {1, 1}, {1, 1}, 1);
    }
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace terra
