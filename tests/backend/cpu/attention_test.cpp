// The fused attention kernels: results never depend on the thread count, a forward that saves the
// weights (grad) and one that does not (inference) give the same bits, strided inputs (as
// MultiheadAttention's head split gives) match contiguous ones, and fully masked rows behave as
// the composed ops (NaN output, zero dq, NaN dv).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <terra/terra.h>

using namespace terra;

namespace {

struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

struct Observed {
  std::vector<std::vector<uint32_t>> values;  // out, dq, dk, dv, dmask
};

// One forward + backward at float32 on fixed data; `mask_kind` 0 none, 1 bool key padding, 2 float.
Observed run(int threads, int mask_kind, bool causal, int64_t sq, int64_t sk) {
  set_num_threads(threads);
  manual_seed(7);
  Tensor q = randn({2, 4, sq, 32}).requires_grad_(), k = randn({2, 4, sk, 32}).requires_grad_(),
         v = randn({2, 4, sk, 24}).requires_grad_();
  Tensor m;
  if (mask_kind == 1) m = gt(arange(sk), full({2, 1, 1, 1}, double(sk - 5)));
  if (mask_kind == 2) m = randn({4, sq, sk}).requires_grad_();
  Tensor o = scaled_dot_product_attention(q, k, v, m, causal);
  (o * randn(o.shape())).sum().backward();
  Observed r;
  for (const Tensor& t : {o, q.grad(), k.grad(), v.grad()}) r.values.push_back(bits(t));
  if (mask_kind == 2) r.values.push_back(bits(m.grad()));
  return r;
}

}  // namespace

TEST(AttentionKernel, ResultsIndependentOfThreadCount) {
  ThreadsGuard g;
  struct C {
    int mask;
    bool causal;
    int64_t sq, sk;
  };
  // Sizes large enough to split over the pool; sk = 300 makes several row blocks per batch entry.
  for (C c : {C{0, false, 70, 90}, C{1, false, 64, 64}, C{2, true, 70, 90}, C{1, true, 40, 300}}) {
    Observed one = run(1, c.mask, c.causal, c.sq, c.sk);
    for (int t : {2, 3, 4}) {
      Observed other = run(t, c.mask, c.causal, c.sq, c.sk);
      ASSERT_EQ(one.values.size(), other.values.size());
      for (size_t i = 0; i < one.values.size(); ++i)
        EXPECT_EQ(one.values[i], other.values[i]) << "mask " << c.mask << " causal " << c.causal << " threads " << t
                                                  << " value " << i;
    }
  }
}

TEST(AttentionKernel, InferenceAndTrainingForwardsAgree) {
  manual_seed(3);
  Tensor q = randn({3, 2, 50, 16}), k = randn({3, 2, 70, 16}), v = randn({3, 2, 70, 8});
  Tensor m = randn({50, 70});
  Tensor infer;
  {
    NoGradGuard ng;
    infer = scaled_dot_product_attention(q, k, v, m, true);
  }
  Tensor qg = q.detach().requires_grad_();
  Tensor train = scaled_dot_product_attention(qg, k, v, m, true);
  EXPECT_EQ(bits(infer), bits(train));
}

// q, k, v as views into one [B, S, 3, H, D] projection (MultiheadAttention's layout).
TEST(AttentionKernel, StridedInputsMatchContiguous) {
  manual_seed(5);
  const int64_t B = 2, S = 20, H = 3, D = 8;
  Tensor qkv = randn({B, S, 3, H, D}).permute({2, 0, 3, 1, 4});
  Tensor q = qkv.select(0, 0), k = qkv.select(0, 1), v = qkv.select(0, 2);
  ASSERT_FALSE(q.is_contiguous());
  Tensor a = scaled_dot_product_attention(q, k, v, {}, true);
  Tensor b = scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), {}, true);
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-6f * std::max(1.0f, std::fabs(y[i]))) << i;
}

// A query whose every key is masked: NaN output (softmax of an all -inf row), and in backward no
// gradient through the masked scores, exactly as masked_fill + softmax + matmul give.
TEST(AttentionKernel, FullyMaskedRowMatchesComposedOps) {
  manual_seed(9);
  std::vector<bool> mb(4 * 6);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) mb[size_t(i * 6 + j)] = i == 1 || (i + j) % 4 == 0;
  Tensor m = tensor_bool(mb, {4, 6});
  Tensor q0 = randn({2, 4, 5}, DType::Float64), k0 = randn({2, 6, 5}, DType::Float64), v0 = randn({2, 6, 3}, DType::Float64);
  Tensor g = randn({2, 4, 3}, DType::Float64);
  auto grads = [&](bool fused) {
    Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
    Tensor o = fused ? scaled_dot_product_attention(q, k, v, m)
                     : matmul(softmax(masked_fill(matmul(q * (1 / std::sqrt(5.0)), k.transpose(-2, -1)), m, -INFINITY), -1), v);
    (o * g).sum().backward();
    return std::vector<std::vector<double>>{o.to_vector<double>(), q.grad().to_vector<double>(),
                                            k.grad().to_vector<double>(), v.grad().to_vector<double>()};
  };
  auto fused = grads(true), composed = grads(false);
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (size_t t = 0; t < 4; ++t)
    for (size_t i = 0; i < fused[t].size(); ++i) {
      const double a = fused[t][i], b = composed[t][i];
      if (std::isnan(b)) EXPECT_TRUE(std::isnan(a)) << names[t] << " " << i;
      else EXPECT_NEAR(a, b, 1e-12 * std::max(1.0, std::fabs(b))) << names[t] << " " << i;
    }
  // The row is NaN in the output; its dq is zero, every dk is finite, dv is NaN (P^T dO).
  EXPECT_TRUE(std::isnan(fused[0][3]));
  EXPECT_EQ(fused[1][5], 0.0);
  EXPECT_FALSE(std::isnan(fused[2][0]));
  EXPECT_TRUE(std::isnan(fused[3][0]));
}
