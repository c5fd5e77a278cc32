// Bad inputs to the fused attention ops: std::invalid_argument "[op] ..." naming the shapes, at the
// call, before any work; nn::functional and MultiheadAttention report the op's error.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include <terra/terra.h>

namespace terra {
namespace {

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

const std::string kOp = "[scaled_dot_product_attention] ";

TEST(AttentionErrors, Shapes) {
  expect_invalid([] { scaled_dot_product_attention(zeros({2, 3, 4}), zeros({2, 5, 3}), zeros({2, 5, 2})); },
                 kOp + "q and k must have the same last dim D (q [2, 3, 4], k [2, 5, 3], v [2, 5, 2])");
  expect_invalid([] { scaled_dot_product_attention(zeros({2, 3, 4}), zeros({2, 5, 4}), zeros({2, 6, 2})); },
                 kOp + "k and v must have the same length Sk (q [2, 3, 4], k [2, 5, 4], v [2, 6, 2])");
  expect_invalid([] { scaled_dot_product_attention(zeros({2, 3, 4}), zeros({3, 5, 4}), zeros({3, 5, 2})); },
                 kOp + "the batch dims of q, k and v do not broadcast", "q [2, 3, 4], k [3, 5, 4]");
  expect_invalid([] { scaled_dot_product_attention(zeros({4}), zeros({5, 4}), zeros({5, 2})); },
                 kOp + "q, k and v must have at least 2 dims", "q [4]");
  expect_invalid([] { scaled_dot_product_attention(zeros({2, 3, 4}), zeros({2, 5, 4}), zeros({2, 5, 2}), zeros({3, 4})); },
                 kOp + "attn_mask does not broadcast to the scores' shape [2, 3, 5]", "attn_mask [3, 4]");
  expect_invalid([] { scaled_dot_product_attention(zeros({3, 4}), zeros({5, 4}), zeros({5, 2}), zeros({2, 2, 3, 5})); },
                 kOp + "attn_mask does not broadcast", "[3, 5]");
  expect_invalid([] { scaled_dot_product_attention(Tensor(), zeros({5, 4}), zeros({5, 2})); }, kOp + "q is undefined");
}

TEST(AttentionErrors, Dtypes) {
  expect_invalid([] { scaled_dot_product_attention(zeros({3, 4}, DType::Int64), zeros({5, 4}), zeros({5, 2})); },
                 kOp + "q must be float32 or float64, got int64");
  expect_invalid([] { scaled_dot_product_attention(zeros({3, 4}), zeros({5, 4}, DType::Float64), zeros({5, 2})); },
                 kOp + "q, k and v must have the same dtype, got float32, float64 and float32");
  expect_invalid([] { scaled_dot_product_attention(zeros({3, 4}), zeros({5, 4}), zeros({5, 2}), zeros({5}, DType::Int64)); },
                 kOp + "attn_mask must be bool or float32 like q, got int64");
  // A floating mask of the other precision is converted, as the scores would be promoted.
  Tensor o = scaled_dot_product_attention(zeros({3, 4}), zeros({5, 4}), ones({5, 2}), zeros({5}, DType::Float64));
  EXPECT_EQ(o.dtype(), DType::Float32);
  EXPECT_EQ(o.to_vector<float>(), std::vector<float>(6, 1.0f));
}

TEST(AttentionErrors, BackwardOp) {
  const std::string op = "[scaled_dot_product_attention_backward] ";
  expect_invalid([] {
    scaled_dot_product_attention_backward(zeros({3, 3}), zeros({3, 4}), zeros({5, 4}), zeros({5, 2}), zeros({3, 5}), {},
                                          false, 0.5, false);
  }, op + "grad_out must be float32 [3, 2]", "grad_out [3, 3]");
  expect_invalid([] {
    scaled_dot_product_attention_backward(zeros({3, 2}), zeros({3, 4}), zeros({5, 4}), zeros({5, 2}), zeros({5, 3}), {},
                                          false, 0.5, false);
  }, op + "weights must be float32 [3, 5]", "weights [5, 3]");
  expect_invalid([] {
    scaled_dot_product_attention_backward(zeros({3, 2}), zeros({3, 4}), zeros({5, 4}), zeros({5, 2}), zeros({3, 5}),
                                          zeros({3, 5}), false, 0.5, false);
  }, op + "attn_mask must be bool, got float32");
}

// The callers built on the op report its error (validation lives in the op's inference).
TEST(AttentionErrors, FunctionalAndModule) {
  expect_invalid([] { nn::functional::scaled_dot_product_attention(zeros({2, 3, 4}), zeros({2, 5, 3}), zeros({2, 5, 2})); },
                 kOp + "q and k must have the same last dim D");
  nn::MultiheadAttention mha(8, 2);
  Tensor x = zeros({2, 3, 8});
  expect_invalid([&] { mha.forward(x, x, x, ones({3, 4}, DType::Bool)); }, "[nn::MultiheadAttention] attn_mask must be");
}

}  // namespace
}  // namespace terra
