// The fused linear ops (GEMM with the bias, and relu, in its output pass) must give exactly the
// bits of the compositions they replace, matmul(x, w.t()) + b (then relu): the output and all
// three gradients, for 1-D, 2-D and batched inputs, with the GEMM whole or split into per-thread
// blocks; and nn::Sequential's Linear + ReLU the bits of the layers called one by one.
#include <gtest/gtest.h>

#include <terra/core/dispatch.h>
#include <terra/terra.h>

using namespace terra;

namespace {

struct Result {
  std::vector<float> y, gx, gw, gb;
};

Result run(bool fused, const Shape& xs, int64_t out, bool with_relu = false) {
  manual_seed(11);
  const int64_t in = xs.back();
  Tensor x, w, b, gy;
  {
    NoGradGuard ng;
    x = randn(xs);
    w = randn({out, in}) * 0.1;
    b = randn({out});
    Shape ys = xs;
    ys.back() = out;
    gy = randn(ys);
  }
  for (Tensor* t : {&x, &w, &b}) t->requires_grad_();
  Tensor y;
  if (with_relu) y = fused ? linear_relu(x, w, b) : relu(matmul(x, transpose(w, 0, 1)) + b);
  else y = fused ? linear(x, w, b) : matmul(x, transpose(w, 0, 1)) + b;
  y.backward(gy);
  return {y.to_vector<float>(), x.grad().to_vector<float>(), w.grad().to_vector<float>(), b.grad().to_vector<float>()};
}

class ThreadsGuard {
 public:
  ThreadsGuard() : saved_(num_threads()) {}
  ~ThreadsGuard() { set_num_threads(saved_); }

 private:
  int saved_;
};

}  // namespace

TEST(LinearFused, BitIdenticalToMatmulPlusAdd) {
  ThreadsGuard guard;
  // {x shape, out}: the MLP layer, a GEMM split by rows (M >= N) and by columns, batched, 1-D, K = 1.
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{16, 256}, 256}, {{96, 200}, 64}, {{24, 128}, 300}, {{2, 33, 48}, 20}, {{48}, 12}, {{5, 1}, 7}};
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (const auto& [xs, out] : cases)
      for (bool with_relu : {false, true}) {
      Result f = run(true, xs, out, with_relu), u = run(false, xs, out, with_relu);
      std::string what = shape_str(xs) + " -> " + std::to_string(out) + ", " + std::to_string(threads) + " threads" +
                         (with_relu ? ", relu" : "");
      EXPECT_EQ(f.y, u.y) << what;
      EXPECT_EQ(f.gx, u.gx) << what;
      EXPECT_EQ(f.gw, u.gw) << what;
      EXPECT_EQ(f.gb, u.gb) << what;
      EXPECT_FALSE(f.y.empty());
    }
  }
}

TEST(LinearFused, SequentialLinearReluIsTheLayersOneByOne) {
  auto run_seq = [](bool fused) {
    manual_seed(21);
    nn::Sequential seq(nn::Linear(10, 16), nn::ReLU(), nn::Linear(16, 16), nn::ReLU(), nn::Linear(16, 3));
    Tensor x = randn({9, 10});
    Tensor y;
    if (fused) {
      y = seq(x);
    } else {
      y = x;
      for (const auto& m : seq) y = m->forward(y);  // each layer alone: linear, then relu
    }
    y.sum().backward();
    std::vector<std::vector<float>> r{y.to_vector<float>()};
    for (const Tensor& p : seq.parameters()) r.push_back(p.grad().to_vector<float>());
    return r;
  };
  std::vector<std::vector<float>> fused = run_seq(true), plain = run_seq(false);
  ASSERT_EQ(fused.size(), 7u);
  EXPECT_EQ(fused, plain);
}

// The bias is not saved for the backward (only its shape is needed): updating it in place between
// forward and backward stays legal, as it was with the composed add.
TEST(LinearFused, BiasUpdatedBeforeBackwardIsAllowed) {
  Tensor x = ones({3, 4}), w = ones({2, 4}), b = zeros({2});
  w.requires_grad_();
  b.requires_grad_();
  Tensor y = linear(x, w, b);
  {
    NoGradGuard ng;
    b.add_(ones({2}));
  }
  y.sum().backward();
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(8, 3.0f));
  EXPECT_EQ(b.grad().to_vector<float>(), std::vector<float>(2, 3.0f));
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(6, 4.0f));
}

// A linear's backward on a 2-D input with a contiguous weight is the two products and the bias's
// sum, with one view (go^T) for the weight's product: each view more was one more op for
// co-execution's skeleton and runner (the composition made five, and sum_to a reshape).
TEST(LinearFused, BackwardOfA2DInputIsTwoProductsOneViewAndTheBiasSum) {
  struct Recording : Executor {
    TensorList run(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs, const TensorMetas& meta,
                   PhiloxKey rng) override {
      names.push_back(op.name);
      return execute_eager(op, in, attrs, meta, rng);
    }
    std::vector<std::string> names;
  };
  for (bool with_relu : {false, true}) {
    manual_seed(3);
    Tensor x = randn({8, 6}), w = randn({5, 6}), b = randn({5});
    for (Tensor* t : {&x, &w, &b}) t->requires_grad_();
    Tensor y = with_relu ? linear_relu(x, w, b) : linear(x, w, b);
    Tensor gy = ones({8, 5});
    Recording rec;
    {
      ExecutorScope scope(&rec);
      y.backward(gy);
    }
    std::vector<std::string> expected = {"sum", "matmul", "permute", "matmul"};  // transpose is a permute
    if (with_relu) expected.insert(expected.begin(), {"gt", "where"});
    EXPECT_EQ(rec.names, expected) << (with_relu ? "linear_relu" : "linear");
    EXPECT_EQ(b.grad().shape(), (Shape{5}));
    EXPECT_EQ(w.grad().shape(), (Shape{5, 6}));
    EXPECT_TRUE(w.grad().impl()->is_contiguous());
  }
}
