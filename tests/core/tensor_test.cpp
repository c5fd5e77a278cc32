#include <gtest/gtest.h>

#include <terra/terra.h>

using namespace terra;

TEST(Tensor, DefaultIsUndefined) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_THROW(t.shape(), std::invalid_argument);
}

TEST(Tensor, FromHostData) {
  Tensor t = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(tensor({1.f, 2.f}, {3}), std::invalid_argument);
}

TEST(Tensor, ArithmeticBroadcast) {
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  Tensor b = tensor({10.f, 20.f, 30.f}, {3});
  EXPECT_EQ((a + b).to_vector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ((a * 2.0).to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ((1.0 - a).to_vector<float>(), (std::vector<float>{0, -1, -2, -3, -4, -5}));
  Tensor c = tensor({1.f, 2.f}, {2});
  EXPECT_THROW(a + c, std::invalid_argument);
}

TEST(Tensor, TransposeViewSharesStorage) {
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  Tensor t = a.transpose(0, 1);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(t.reshape({6}).to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  t.select(0, 1).fill_(0.0);  // writes through to a
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 0, 3, 4, 0, 6}));
}

TEST(Tensor, SumAndMean) {
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  EXPECT_FLOAT_EQ(a.sum().item<float>(), 21.f);
  EXPECT_EQ(a.sum({0}).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(a.sum({1}, true).shape(), (Shape{2, 1}));
  EXPECT_FLOAT_EQ(a.mean().item<float>(), 3.5f);
}

TEST(Tensor, MatmulAndBackward) {
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  a.requires_grad_();
  Tensor b = tensor({5.f, 6.f, 7.f, 8.f}, {2, 2});
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{19, 22, 43, 50}));
  c.sum().backward();
  // d(sum(a@b))/da = ones @ b^T
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{11, 15, 11, 15}));
}

TEST(Tensor, InplaceAfterSaveIsRefused) {
  Tensor a = tensor({1.f, 2.f}, {2});
  a.requires_grad_();
  Tensor b = a * 2.0;
  Tensor c = b * b;  // saves b
  b.add_(1.0);
  EXPECT_THROW(c.sum().backward(), std::invalid_argument);
}

TEST(Tensor, InplaceWithoutGradientOnGradTensorIsRefused) {
  Tensor a = tensor({1.f, 2.f}, {2});
  a.requires_grad_();
  Tensor b = a * 2.0;
  EXPECT_THROW(b.mul_(3.0), std::invalid_argument);
  {
    NoGradGuard g;
    b.mul_(3.0);  // allowed without grad mode
  }
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{6, 12}));
}
