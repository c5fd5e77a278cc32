// User errors of the indexing, joining, softmax and loss ops: std::invalid_argument naming the op
// and the shapes, and the library stays usable afterwards.
#include <gtest/gtest.h>

#include <string>

#include <terra/terra.h>

namespace terra {
namespace {

// Runs f, expects E (std::invalid_argument; std::out_of_range for a dim out of range, torch's
// IndexError) whose message contains every needle.
template <class E = std::invalid_argument, class F>
void expect_error(F f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning " << *needles.begin();
  } catch (const E& e) {
    std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message: " << msg << "\nmissing: " << n;
  }
}

Tensor idx(std::vector<int64_t> v, Shape s) { return tensor(std::move(v), std::move(s)); }

void still_works() {
  Tensor a = ones({2, 3}).requires_grad_();
  Tensor y = cat({a, a * 2.0}, 0);
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  y.sum().backward();
  EXPECT_EQ(a.grad().to_vector<float>(), std::vector<float>(6, 3.0f));
}

TEST(IndexingErrors, CatShapeMismatch) {
  expect_error([] { cat({zeros({2, 3}), zeros({2, 4})}, 0); }, {"[cat]", "[2, 4]", "[2, 3]"});
  expect_error([] { cat({zeros({2, 3}), zeros({2, 3, 1})}, 0); }, {"[cat]", "[2, 3, 1]"});
  expect_error([] { cat({}, 0); }, {"[cat]"});
  expect_error<std::out_of_range>([] { cat({zeros({2, 3})}, 2); }, {"[cat]", "dim 2", "[-2, 1]"});
  expect_error([] { stack({zeros({2, 3}), zeros({3, 2})}, 0); }, {"[stack]", "[3, 2]", "[2, 3]"});
  still_works();
}

TEST(IndexingErrors, BadIndexDtype) {
  expect_error([] { index_select(zeros({3, 2}), 0, zeros({2})); }, {"[index_select]", "int64", "float32", "[2]"});
  expect_error([] { gather(zeros({3, 2}), 0, zeros({3, 2})); }, {"[gather]", "int64", "[3, 2]"});
  expect_error([] { embedding(zeros({4, 2}), tensor_bool({true}, {1})); }, {"[embedding]", "int64", "bool"});
  expect_error([] { cross_entropy(zeros({3, 4}), zeros({3})); },
               {"[cross_entropy] targets must be int64 class indices, got float32 of shape [3]"});
  still_works();
}

TEST(IndexingErrors, GatherIndexShapeMismatch) {
  expect_error([] { gather(zeros({3, 2}), 1, idx({0, 1, 0, 1}, {4, 1})); }, {"[gather]", "[4, 1]", "[3, 2]"});
  expect_error([] { gather(zeros({3, 2}), 1, idx({0, 1}, {2})); }, {"[gather]", "[2]", "[3, 2]"});
  expect_error([] { index_select(zeros({3, 2}), 0, idx({0, 1}, {1, 2})); }, {"[index_select]", "1-D", "[1, 2]"});
  expect_error([] { embedding(zeros({4}), idx({0}, {1})); }, {"[embedding]", "[4]"});
  expect_error([] { cross_entropy(zeros({3, 4}), idx({0, 1}, {2})); }, {"[cross_entropy]", "[3, 4]", "[2]", "[3]"});
  expect_error([] { binary_cross_entropy_with_logits(zeros({3}), zeros({4})); },
               {"[binary_cross_entropy_with_logits]", "[3]", "[4]"});
  expect_error([] { mse_loss(zeros({3}), zeros({4})); }, {"[mse_loss]", "[3]", "[4]"});
  still_works();
}

// Value checks run inside the kernel (they need the data), still as std::invalid_argument.
TEST(IndexingErrors, OutOfRangeIndexValues) {
  expect_error([] { index_select(zeros({3, 2}), 0, idx({0, 3}, {2})); }, {"[index_select]", "3", "size 3"});
  expect_error([] { index_select(zeros({3, 2}), 0, idx({-1}, {1})); }, {"[index_select]", "-1"});
  expect_error([] { gather(zeros({3, 2}), 1, idx({0, 2, 0}, {3, 1})); }, {"[gather]", "2", "size 2"});
  expect_error([] { embedding(zeros({4, 2}), idx({1, 4}, {2})); }, {"[embedding]", "4"});
  expect_error([] { cross_entropy(zeros({2, 3}), idx({0, 3}, {2})); }, {"[nll_loss]", "3", "3 classes"});
  expect_error([] { cross_entropy(zeros({2, 3}), idx({0, -5}, {2})); }, {"-5"});
  still_works();
}

TEST(IndexingErrors, UndefinedInputs) {
  Tensor u;
  expect_error([&] { cat({zeros({2}), u}, 0); }, {"[cat]", "undefined"});
  expect_error([&] { stack({u}, 0); }, {"[stack]", "undefined"});
  expect_error([&] { index_select(u, 0, idx({0}, {1})); }, {"[index_select]", "undefined"});
  expect_error([&] { index_select(zeros({2}), 0, u); }, {"[index_select]", "undefined"});
  expect_error([&] { gather(u, 0, idx({0}, {1})); }, {"[gather]", "undefined"});
  expect_error([&] { embedding(u, idx({0}, {1})); }, {"[embedding]", "undefined"});
  expect_error([&] { split(u, 2, 0); }, {"[split]", "undefined"});
  expect_error([&] { chunk(u, 2, 0); }, {"[chunk]", "undefined"});
  expect_error([&] { softmax(u, 0); }, {"[softmax]", "undefined"});
  expect_error([&] { log_softmax(u, 0); }, {"[log_softmax]", "undefined"});
  expect_error([&] { cross_entropy(u, idx({0}, {1})); }, {"[cross_entropy]", "undefined"});
  expect_error([&] { mse_loss(u, zeros({1})); }, {"[mse_loss]", "undefined"});
  expect_error([&] { dropout(u, 0.5, true); }, {"[dropout]", "undefined"});
  expect_error([&] { bernoulli(u); }, {"[bernoulli]", "undefined"});
  still_works();
}

TEST(IndexingErrors, OtherArguments) {
  expect_error([] { split(zeros({5}), std::vector<int64_t>{2, 2}, 0); }, {"[split]", "[2, 2]", "[5]"});
  expect_error([] { split(zeros({5}), 0, 0); }, {"[split]"});
  expect_error([] { chunk(zeros({5}), 0, 0); }, {"[chunk]"});
  expect_error<std::out_of_range>([] { softmax(zeros({2, 3}), 2); },
                                  {"[softmax] dim 2 is out of range for a tensor of rank 2 (expected to be in range of [-2, 1])"});
  expect_error([] { softmax(idx({1, 2}, {2}), 0); }, {"[softmax]", "int64"});
  expect_error([] { cross_entropy(zeros({2, 3}), idx({0, 1}, {2}), -100, "avg"); }, {"[cross_entropy]", "avg"});
  expect_error([] { embedding(zeros({4, 2}), idx({0}, {1}), 4); }, {"[embedding]", "padding_idx"});
  expect_error([] { eye(-1); }, {"[eye]"});
  still_works();
}

}  // namespace
}  // namespace terra
