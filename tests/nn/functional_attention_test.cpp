// nn::functional::scaled_dot_product_attention: the fused op unless dropout is active, and the
// composed (dropout) path computes the same attention with p -> its weights scaled as dropout does.
#include <gtest/gtest.h>

#include <cmath>

#include <terra/terra.h>

#include "terra/autograd/node.h"

using namespace terra;

namespace {

std::string producer(const Tensor& t) { return t.impl()->grad_fn ? t.impl()->grad_fn->op->name : "(leaf)"; }

}  // namespace

TEST(FunctionalAttention, FusedWithoutActiveDropout) {
  manual_seed(0);
  Tensor q = randn({2, 3, 5, 4}).requires_grad_(), k = randn({2, 3, 6, 4}), v = randn({2, 3, 6, 2});
  Tensor m = gt(arange(6), full({5, 1}, 3.0));
  EXPECT_EQ(producer(nn::functional::scaled_dot_product_attention(q, k, v, m)), "scaled_dot_product_attention");
  EXPECT_EQ(producer(nn::functional::scaled_dot_product_attention(q, k, v, m, 0.5, false, /*training=*/false)),
            "scaled_dot_product_attention");
  // Active dropout: composed from ops, ending in the matmul with v.
  EXPECT_EQ(producer(nn::functional::scaled_dot_product_attention(q, k, v, m, 0.5, false, true)), "matmul");
}

// The composed path with causal masking and Sq != Sk masks the same keys as the fused op: with a
// dropout probability so small that nothing is dropped, both give the same values.
TEST(FunctionalAttention, ComposedPathMatchesFusedSemantics) {
  manual_seed(1);
  Tensor q = randn({2, 4, 3}, DType::Float64), k = randn({2, 6, 3}, DType::Float64), v = randn({2, 6, 5}, DType::Float64);
  Tensor fused = nn::functional::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  Tensor composed = nn::functional::scaled_dot_product_attention(q, k, v, {}, 1e-300, true, true);
  std::vector<double> a = fused.to_vector<double>(), b = composed.to_vector<double>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << i;
}
