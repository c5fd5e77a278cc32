// nn::Module: registration order and counts, naming, ownership, train/eval propagation.
#include <gtest/gtest.h>

#include <terra/terra.h>

using namespace terra;

namespace {

struct Net : nn::Module {
  Tensor scale;
  nn::Linear fc1{3, 4};
  nn::Linear fc2{4, 2, /*bias=*/false};
  nn::Dropout drop{0.5};
  Net() {
    scale = register_parameter("scale", ones({2}));
    register_module("fc1", fc1);
    register_module("drop", drop);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(drop(relu(fc1(x)))) * scale; }
};

std::vector<std::string> names(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (auto& [n, t] : v) out.push_back(n);
  return out;
}

}  // namespace

TEST(NnModule, ParametersOwnThenChildrenInRegistrationOrder) {
  Net net;
  auto np = net.named_parameters();
  EXPECT_EQ(names(np), (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight"}));
  auto ps = net.parameters();
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[0].shape(), (Shape{2}));
  EXPECT_EQ(ps[1].shape(), (Shape{4, 3}));
  EXPECT_EQ(ps[2].shape(), (Shape{4}));
  EXPECT_EQ(ps[3].shape(), (Shape{2, 4}));
  // The handles are the layers' own tensors, so in-place updates reach the layer.
  EXPECT_TRUE(ps[1].same(net.fc1.weight));
  for (const Tensor& p : ps) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  EXPECT_FALSE(net.fc2.bias.defined());
  EXPECT_EQ(net.named_children().size(), 3u);
  EXPECT_EQ(net.forward(ones({5, 3})).shape(), (Shape{5, 2}));
}

TEST(NnModule, RegisterParameterDetachesAndRejectsBadNames) {
  nn::Module m;
  Tensor a = ones({2}).requires_grad_();
  Tensor& p = m.register_parameter("p", a * 2.0);  // non-leaf: stored detached
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{2, 2}));
  EXPECT_THROW(m.register_parameter("p", ones({1})), std::invalid_argument);
  EXPECT_THROW(m.register_buffer("p", ones({1})), std::invalid_argument);
  EXPECT_THROW(m.register_parameter("a.b", ones({1})), std::invalid_argument);
  EXPECT_THROW(m.register_parameter("", ones({1})), std::invalid_argument);
  EXPECT_THROW(m.register_parameter("u", Tensor()), std::invalid_argument);
  EXPECT_THROW(m.forward(ones({1})), std::logic_error);
}

TEST(NnModule, SequentialTakesModulesByValue) {
  nn::Sequential seq(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(names(seq.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  Tensor x = rand({5, 4});
  auto& l0 = seq.at<nn::Linear>(0);
  auto& l2 = seq.at<nn::Linear>(2);
  EXPECT_THROW(seq.at<nn::Linear>(1), std::invalid_argument);
  EXPECT_THROW(seq[3], std::out_of_range);
  Tensor ref = linear(relu(linear(x, l0.weight, l0.bias)), l2.weight, l2.bias);
  EXPECT_EQ(seq(x).to_vector<float>(), ref.to_vector<float>());

  // Nesting and moving owning containers keeps the parameters.
  nn::Sequential outer(std::move(seq), std::make_shared<nn::Tanh>());
  EXPECT_EQ(outer.parameters().size(), 4u);
  EXPECT_EQ(names(outer.named_parameters())[0], "0.0.weight");
  nn::Sequential moved(std::move(outer));
  EXPECT_EQ(moved.parameters().size(), 4u);
  EXPECT_EQ(moved(x).shape(), (Shape{5, 2}));
}

TEST(NnModule, MovingAModuleWithReferencedChildrenThrows) {
  Net net;
  EXPECT_THROW(Net(std::move(net)), std::logic_error);
  nn::Linear a(2, 3);
  nn::Linear b(std::move(a));  // leaf layers move freely
  EXPECT_EQ(b.parameters().size(), 2u);
  EXPECT_TRUE(b.parameters()[0].same(b.weight));
}

TEST(NnModule, TrainEvalPropagatesToChildren) {
  nn::Sequential inner(nn::Dropout(0.5), nn::BatchNorm2d(3));
  nn::Sequential seq(std::move(inner), nn::ReLU());
  EXPECT_TRUE(seq.is_training());
  seq.eval();
  EXPECT_FALSE(seq.is_training());
  auto& in = seq.at<nn::Sequential>(0);
  EXPECT_FALSE(in.is_training());
  EXPECT_FALSE(in[0].is_training());
  EXPECT_FALSE(in[1].is_training());
  seq.train();
  EXPECT_TRUE(in[1].is_training());
}

TEST(NnModule, BuffersAreSeparateFromParameters) {
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(names(bn.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(names(bn.named_buffers()), (std::vector<std::string>{"running_mean", "running_var"}));
  for (const Tensor& b : bn.buffers()) EXPECT_FALSE(b.requires_grad());
  nn::Sequential seq(nn::BatchNorm2d(2), nn::BatchNorm2d(2, 1e-5, 0.1, /*affine=*/false));
  EXPECT_EQ(seq.buffers().size(), 4u);
  EXPECT_EQ(seq.parameters().size(), 2u);
  EXPECT_EQ(names(seq.named_buffers())[2], "1.running_mean");
}

TEST(NnModule, ZeroGradClearsGradients) {
  nn::Linear lin(3, 2);
  lin(ones({4, 3})).sum().backward();
  EXPECT_TRUE(lin.weight.grad().defined());
  EXPECT_EQ(lin.bias.grad().to_vector<float>(), (std::vector<float>{4, 4}));
  lin.zero_grad();
  EXPECT_FALSE(lin.weight.grad().defined());
  EXPECT_FALSE(lin.bias.grad().defined());
}

TEST(NnModule, LayerCounts) {
  EXPECT_EQ(nn::Conv2d(3, 8, 3).parameters().size(), 2u);
  EXPECT_EQ(nn::Conv2d(3, 8, 3, 1, 0, 1, 1, /*bias=*/false).parameters().size(), 1u);
  EXPECT_EQ(nn::LayerNorm(5).parameters().size(), 2u);
  EXPECT_EQ(nn::Embedding(10, 4).parameters().size(), 1u);
  nn::MultiheadAttention mha(8, 2);
  EXPECT_EQ(names(mha.named_parameters()),
            (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(nn::ReLU().parameters().size(), 0u);
  EXPECT_THROW(nn::Linear(0, 3), std::invalid_argument);
  EXPECT_THROW(nn::Conv2d(3, 8, 3, 1, 0, 1, /*groups=*/2), std::invalid_argument);
  EXPECT_THROW(nn::MultiheadAttention(10, 3), std::invalid_argument);
  EXPECT_THROW(nn::Dropout(1.5), std::invalid_argument);
}
