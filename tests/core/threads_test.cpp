// terra::set_num_threads and the determinism it promises: the same bits in every run and mode at
// one thread count (the split of a loop or a oneDNN call depends on shapes and the count only).
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <terra/terra.h>

#include "runtime/mode_harness.h"

namespace terra {
namespace {

using testing::Observed;
using testing::run_in_mode;

struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

TEST(Threads, SetAndGet) {
  ThreadsGuard g;
  EXPECT_GE(num_threads(), 1);
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  EXPECT_EQ(get_num_threads(), 3);
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
}

TEST(Threads, RejectsCountsBelowOne) {
  ThreadsGuard g;
  set_num_threads(2);
  for (int bad : {0, -1}) {
    try {
      set_num_threads(bad);
      FAIL() << "no exception for " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("[set_num_threads]"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(num_threads(), 2);  // unchanged
}

// Elementwise ops, a reduction, a split matmul (rows and columns), batched matmul and a conv with
// its gradients: large enough that every one of them is split over the pool at 2+ threads.
void program(Engine& e, const std::function<void(const Tensor&)>& obs) {
  Tensor w = randn({96, 300}), cw = randn({8, 3, 3, 3});
  w.requires_grad_();
  cw.requires_grad_();
  for (int i = 0; i < 3; ++i) {
    auto s = e.step();
    Tensor x = randn({512, 96});
    Tensor y = add(mul(exp(mul(x, 0.1)), x), 1.0);      // elementwise, 49k elements
    Tensor h = relu(matmul(y, w));                      // [512, 300]: split by rows
    Tensor v = matmul(randn({16, 512}), h);             // [16, 300]: split by columns
    Tensor bm = matmul(randn({4, 64, 96}), randn({96, 80}));  // batched
    Tensor img = randn({8, 3, 40, 40});
    Tensor c = conv2d(img, cw, Tensor(), 1, 1);         // split over the batch
    Tensor loss = add(add(sum(mul(h, h)), sum(v)), add(sum(bm), sum(mul(c, c))));
    loss.backward();
    obs(loss);
    obs(v);
    obs(c);
    obs(exp(randn({400000})));  // one big elementwise op
  }
  obs(w.grad());
  obs(cw.grad());
}

TEST(Threads, SameBitsInEveryRunAndModeAtOneThreadCount) {
  ThreadsGuard g;
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    Observed eager = run_in_mode(Mode::Eager, program);
    Observed again = run_in_mode(Mode::Eager, program);
    Observed co = run_in_mode(Mode::CoExecution, program);
    Observed lazy = run_in_mode(Mode::Lazy, program);
    ASSERT_EQ(eager.values.size(), 14u);
    testing::expect_same(eager, again, "eager again");
    testing::expect_same(eager, co, "coexec");
    testing::expect_same(eager, lazy, "lazy");
  }
}

// The split matmul, conv (forward, both gradients) and average pooling compute the unsplit results
// (up to float rounding).
TEST(Threads, SplitKernelsMatchOneThread) {
  ThreadsGuard g;
  manual_seed(3);
  Tensor a = randn({200, 130}), b = randn({130, 170}), s = randn({9, 200}), img = randn({6, 4, 20, 20}),
         k = randn({5, 4, 3, 3}), pool_in = randn({8, 64, 32, 32}), gy = randn({6, 5, 20, 20});
  auto run = [&] {
    return std::vector<std::vector<float>>{
        matmul(a, b).to_vector<float>(), matmul(s, a).to_vector<float>(),
        conv2d(img, k, Tensor(), 1, 1).to_vector<float>(),
        conv2d_backward_input(gy, k, img.shape(), {1, 1}, {1, 1}, {1, 1}, 1).to_vector<float>(),
        conv2d_backward_weight(gy, img, k.shape(), {1, 1}, {1, 1}, {1, 1}, 1).to_vector<float>(),
        avg_pool2d(pool_in, 2).to_vector<float>()};
  };
  set_num_threads(1);
  auto one = run();
  // The float64 reference for the first product.
  Tensor ref = matmul(a.to(DType::Float64), b.to(DType::Float64));
  std::vector<double> r = ref.to_vector<double>();
  for (int t : {2, 3, 4}) {
    set_num_threads(t);
    auto many = run();
    for (size_t q = 0; q < one.size(); ++q) {
      ASSERT_EQ(one[q].size(), many[q].size());
      for (size_t i = 0; i < one[q].size(); ++i)
        ASSERT_NEAR(one[q][i], many[q][i], 1e-3 * (1 + std::fabs(one[q][i]))) << "t=" << t << " q=" << q << " i=" << i;
    }
    for (size_t i = 0; i < r.size(); ++i) ASSERT_NEAR(many[0][i], r[i], 1e-3 * (1 + std::fabs(r[i])));
  }
}

}  // namespace
}  // namespace terra
