// Hand-written rows of the bad-input table: for each op, inputs it must refuse (shapes, dtypes,
// indices, sizes past int64) and NaN/inf/empty inputs it must handle exactly as eager does.
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/bad_input_table.h"

namespace terra::testing {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Deterministic host values (no RNG: every mode builds the same inputs).
std::vector<double> vals(const Shape& s) {
  std::vector<double> v(size_t(numel_of(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t(i * 37 % 11) - 5) * 0.25;
  return v;
}
Tensor F(Shape s) {
  auto v = vals(s);
  return tensor(std::vector<float>(v.begin(), v.end()), s);
}
Tensor D(Shape s) { return tensor_f64(vals(s), s); }
Tensor I(std::vector<int64_t> v, Shape s) { return tensor(std::move(v), std::move(s)); }
Tensor B(Shape s) {
  std::vector<bool> b(size_t(numel_of(s)));
  for (size_t i = 0; i < b.size(); ++i) b[i] = i % 3 == 0;
  return tensor_bool(b, s);
}
Tensor Fv(std::vector<float> v, Shape s) { return tensor(std::move(v), std::move(s)); }

struct Adder {
  std::vector<BadCase>& out;
  std::string cls;
  Expect expect;
  void operator()(std::string name, std::vector<std::string> ops, std::function<Tensor()> call) const {
    out.push_back(BadCase{name, cls, std::move(ops), expect, std::move(call)});
  }
};

void shape_rows(const Adder& add) {
  add("add/broadcast", {"add"}, [] { return F({2, 3}) + F({4}); });
  add("sub/broadcast", {"sub"}, [] { return F({2, 3}) - F({2, 4}); });
  add("mul/broadcast", {"mul"}, [] { return F({3, 1, 2}) * F({4, 3}); });
  add("div/broadcast", {"div"}, [] { return F({5}) / F({2, 4}); });
  add("maximum/broadcast", {"maximum"}, [] { return maximum(F({2, 3}), F({2})); });
  add("minimum/broadcast", {"minimum"}, [] { return minimum(F({2, 3}), F({3, 3})); });
  add("pow/broadcast", {"pow"}, [] { return pow(F({2, 3}), F({4})); });
  add("eq/broadcast", {"eq"}, [] { return eq(F({3}), F({4})); });
  add("lt/broadcast", {"lt"}, [] { return lt(F({2, 3}), F({3, 2})); });
  add("logical_and/broadcast", {"logical_and"}, [] { return logical_and(B({2, 3}), B({4})); });
  add("logical_or/broadcast", {"logical_or"}, [] { return logical_or(B({3}), B({2})); });
  add("where/broadcast", {"where"}, [] { return where(B({2, 3}), F({2, 3}), F({4})); });
  add("masked_fill/mask_shape", {"masked_fill"}, [] { return masked_fill(F({2, 3}), B({4}), 1.0); });
  add("add_/self_too_small", {"add_"}, [] { Tensor s = F({3}); s.add_(F({2, 3})); return s; });
  add("sub_/broadcast", {"sub_"}, [] { Tensor s = F({2, 3}); s.sub_(F({4})); return s; });
  add("mul_/broadcast", {"mul_"}, [] { Tensor s = F({2, 3}); s.mul_(F({2, 2})); return s; });
  add("div_/self_too_small", {"div_"}, [] { Tensor s = F({1}); s.div_(F({3})); return s; });
  add("copy_/shape", {"copy_"}, [] { Tensor s = F({2, 3}); s.copy_(F({3, 2})); return s; });
  add("matmul/inner_dims", {"matmul"}, [] { return matmul(F({2, 3}), F({4, 5})); });
  add("matmul/scalar", {"matmul"}, [] { return matmul(F({}), F({3})); });
  add("matmul/batch", {"matmul"}, [] { return matmul(F({2, 3, 4}), F({3, 4, 5})); });
  add("matmul/vec_vec", {"matmul"}, [] { return matmul(F({3}), F({4})); });
  add("sdpa/head_dim", {"scaled_dot_product_attention"},
      [] { return scaled_dot_product_attention(F({2, 3, 4}), F({2, 5, 3}), F({2, 5, 2})); });
  add("sdpa/kv_length", {"scaled_dot_product_attention"},
      [] { return scaled_dot_product_attention(F({2, 3, 4}), F({2, 5, 4}), F({2, 6, 2})); });
  add("sdpa/batch", {"scaled_dot_product_attention"},
      [] { return scaled_dot_product_attention(F({2, 3, 4}), F({3, 5, 4}), F({3, 5, 2})); });
  add("sdpa/mask_shape", {"scaled_dot_product_attention"},
      [] { return scaled_dot_product_attention(F({2, 3, 4}), F({2, 5, 4}), F({2, 5, 2}), B({3, 4})); });
  add("sdpa/rank", {"scaled_dot_product_attention"},
      [] { return scaled_dot_product_attention(F({4}), F({5, 4}), F({5, 2})); });
  add("linear/in_features", {"linear", "matmul"}, [] { return linear(F({2, 3}), F({4, 5})); });
  add("linear/bias", {"linear", "add"}, [] { return linear(F({2, 3}), F({4, 3}), F({5})); });
  add("conv2d/channels", {"conv2d"}, [] { return conv2d(F({1, 3, 5, 5}), F({2, 4, 3, 3})); });
  add("conv2d/rank", {"conv2d"}, [] { return conv2d(F({5, 5}), F({2, 3, 3, 3})); });
  add("conv2d/kernel_too_big", {"conv2d"}, [] { return conv2d(F({1, 3, 2, 2}), F({2, 3, 3, 3})); });
  add("conv2d/bias", {"conv2d"}, [] { return conv2d(F({1, 3, 5, 5}), F({2, 3, 3, 3}), F({3})); });
  add("conv2d/groups", {"conv2d"}, [] { return conv2d(F({1, 3, 5, 5}), F({2, 3, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 2); });
  add("conv_transpose2d/channels", {"conv_transpose2d"}, [] { return conv_transpose2d(F({1, 3, 4, 4}), F({4, 2, 3, 3})); });
  add("batch_norm/channels", {"batch_norm"}, [] {
    return batch_norm(F({2, 3, 4, 4}), F({4}), F({4}), F({4}), F({4}), true);
  });
  add("batch_norm/rank", {"batch_norm"}, [] { return batch_norm(F({3}), F({3}), F({3}), F({3}), F({3}), true); });
  add("layer_norm/normalized_shape", {"layer_norm"}, [] { return layer_norm(F({2, 3}), {4}); });
  add("layer_norm/weight", {"layer_norm"}, [] { return layer_norm(F({2, 3}), {3}, F({4})); });
  add("max_pool2d/rank", {"max_pool2d"}, [] { return max_pool2d(F({4}), 2); });
  add("max_pool2d/kernel_too_big", {"max_pool2d"}, [] { return max_pool2d(F({1, 1, 2, 2}), 3); });
  add("avg_pool2d/rank", {"avg_pool2d"}, [] { return avg_pool2d(F({4}), 2); });
  add("avg_pool2d/kernel_too_big", {"avg_pool2d"}, [] { return avg_pool2d(F({1, 1, 2, 2}), 3); });
  add("adaptive_avg_pool2d/rank", {"adaptive_avg_pool2d"}, [] { return adaptive_avg_pool2d(F({4}), {2, 2}); });
  add("upsample_nearest2d/rank", {"upsample_nearest2d"}, [] { return upsample_nearest2d(F({4, 4}), Int2{8, 8}); });
  add("cat/shapes", {"cat"}, [] { return cat({F({2, 3}), F({2, 4})}, 0); });
  add("cat/dim", {"cat"}, [] { return cat({F({2}), F({2})}, 3); });
  add("stack/shapes", {"stack"}, [] { return stack({F({2, 3}), F({3, 2})}, 0); });
  add("split/sizes", {"split"}, [] { return split(F({5}), std::vector<int64_t>{2, 2}, 0)[0]; });
  add("chunk/zero", {"chunk"}, [] { return chunk(F({5}), 0, 0)[0]; });
  add("index_select/dim", {"index_select"}, [] { return index_select(F({3, 2}), 2, I({0}, {1})); });
  add("index_select/index_rank", {"index_select"}, [] { return index_select(F({3, 2}), 0, I({0, 1}, {1, 2})); });
  add("gather/index_rank", {"gather"}, [] { return gather(F({3, 2}), 1, I({0, 1}, {2})); });
  add("gather/dim", {"gather"}, [] { return gather(F({3, 2}), 2, I({0, 1, 0, 1, 0, 1}, {3, 2})); });
  add("embedding/weight_rank", {"embedding"}, [] { return embedding(F({4}), I({0}, {1})); });
  add("cross_entropy/batch", {"cross_entropy", "nll_loss"}, [] { return cross_entropy(F({3, 4}), I({0, 1}, {2})); });
  add("cross_entropy/targets_rank", {"cross_entropy", "nll_loss"},
      [] { return cross_entropy(F({3, 4}), I({0, 1, 2, 0, 1, 2}, {3, 2})); });
  add("nll_loss/batch", {"nll_loss"}, [] { return nll_loss(F({3, 4}), I({0, 1, 2, 3}, {4})); });
  add("mse_loss/shapes", {"mse_loss"}, [] { return mse_loss(F({3}), F({4})); });
  add("bce_logits/shapes", {"binary_cross_entropy_with_logits"},
      [] { return binary_cross_entropy_with_logits(F({3}), F({4})); });
  add("softmax/dim", {"softmax"}, [] { return softmax(F({2, 3}), 2); });
  add("log_softmax/dim", {"log_softmax"}, [] { return log_softmax(F({2, 3}), -3); });
  add("sum/dim", {"sum"}, [] { return F({2, 3}).sum({2}); });
  add("mean/dim", {"mean", "sum"}, [] { return F({2, 3}).mean({-3}); });
  add("var/dim", {"var"}, [] { return var(F({2, 3}), {5}); });
  add("argmax/dim", {"argmax"}, [] { return argmax(F({2, 3}), 2); });
  add("max_dim/dim", {"max_dim", "max"}, [] { return max(F({2, 3}), 3); });
  add("min_dim/dim", {"min_dim", "min"}, [] { return min(F({2, 3}), -4); });
  add("reshape/numel", {"reshape", "view"}, [] { return F({2, 3}).reshape({4, 2}); });
  add("reshape/two_inferred", {"reshape", "view"}, [] { return F({2, 3}).reshape({-1, -1}); });
  add("view/non_contiguous", {"view"}, [] { return F({2, 3}).t().view({6}); });
  add("permute/repeated", {"permute"}, [] { return F({2, 3}).permute({0, 0}); });
  add("permute/length", {"permute"}, [] { return F({2, 3}).permute({0, 1, 2}); });
  add("transpose/dim", {"transpose", "permute"}, [] { return F({2, 3}).transpose(0, 2); });
  add("expand/incompatible", {"expand"}, [] { return F({3}).expand({2, 4}); });
  add("expand/fewer_dims", {"expand"}, [] { return F({2, 3}).expand({3}); });
  add("slice/dim", {"slice"}, [] { return F({2, 3}).slice(2, 0, 1); });
  add("slice/step0", {"slice"}, [] { return F({2, 3}).slice(1, 0, 3, 0); });
  add("squeeze/dim", {"squeeze"}, [] { return F({2, 3}).squeeze(2); });
  add("unsqueeze/dim", {"unsqueeze"}, [] { return F({2, 3}).unsqueeze(4); });
  add("flatten/dims", {"flatten"}, [] { return F({2, 3}).flatten(1, 0); });
  add("dropout/p", {"dropout"}, [] { return dropout(F({3}), 1.5, true); });
  add("bernoulli_p/p", {"bernoulli", "bernoulli_p"}, [] { return bernoulli(Shape{3}, -0.5); });
  add("randint/range", {"randint"}, [] { return randint(5, 5, {3}); });
  add("arange/step0", {"arange"}, [] { return arange(0, 5, 0); });
  add("eye/negative", {"eye"}, [] { return eye(-1); });
  add("argmin/dim", {"argmin"}, [] { return argmin(F({2, 3}), -3); });
  add("dropout_mask/p", {"dropout_mask", "dropout"}, [] { return dropout_mask({3}, 2.0); });
  add("gelu_backward/shapes", {"gelu_backward"}, [] { return gelu_backward(F({3}), F({4})); });
  add("softmax_backward/shapes", {"softmax_backward"}, [] { return softmax_backward(F({2, 3}), F({3, 2}), 1); });
  add("log_softmax_backward/shapes", {"log_softmax_backward", "log_softmax"},
      [] { return log_softmax_backward(F({2, 3}), F({2, 4}), 1); });
  add("conv2d_backward_input/channels", {"conv2d_backward_input"}, [] {
    return conv2d_backward_input(F({1, 2, 3, 3}), F({2, 3, 3, 3}), {1, 4, 5, 5}, {1, 1}, {0, 0}, {1, 1}, 1);
  });
  add("conv2d_backward_weight/channels", {"conv2d_backward_weight"}, [] {
    return conv2d_backward_weight(F({1, 2, 3, 3}), F({1, 4, 5, 5}), {2, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1);
  });
  add("avg_pool2d_backward/shapes", {"avg_pool2d_backward"},
      [] { return avg_pool2d_backward(F({1, 1, 2, 2}), {1, 1, 7, 7}, {2, 2}, {2, 2}, {0, 0}, true); });
  add("adaptive_avg_pool2d_backward/rank", {"adaptive_avg_pool2d_backward"},
      [] { return adaptive_avg_pool2d_backward(F({4}), {1, 1, 4, 4}); });
  add("upsample_nearest2d_backward/rank", {"upsample_nearest2d_backward"},
      [] { return upsample_nearest2d_backward(F({3, 3}), {1, 1, 2, 2}); });
  add("bce_logits_backward/shapes", {"binary_cross_entropy_with_logits_backward"},
      [] { return binary_cross_entropy_with_logits_backward(F({}), F({3}), F({4})); });
  add("zeros/negative_dim", {"zeros", "full"}, [] { return zeros({2, -3}); });
  add("full/negative_dim", {"full"}, [] { return full({-1}, 2.0); });
}

void dtype_rows(const Adder& add) {
  add("softmax/int64", {"softmax"}, [] { return softmax(I({1, 2}, {2}), 0); });
  add("sdpa/int64_mask", {"scaled_dot_product_attention"},
      [] { return scaled_dot_product_attention(F({3, 4}), F({5, 4}), F({5, 2}), I({0, 1, 0, 1, 0}, {5})); });
  add("sdpa/mixed_qkv", {"scaled_dot_product_attention"},
      [] { return scaled_dot_product_attention(F({3, 4}), D({5, 4}), F({5, 2})); });
  add("log_softmax/bool", {"log_softmax"}, [] { return log_softmax(B({2}), 0); });
  add("index_select/float_index", {"index_select"}, [] { return index_select(F({3, 2}), 0, F({2})); });
  add("gather/float_index", {"gather"}, [] { return gather(F({3, 2}), 0, F({3, 2})); });
  add("embedding/bool_index", {"embedding"}, [] { return embedding(F({4, 2}), B({2})); });
  add("embedding/float_index", {"embedding"}, [] { return embedding(F({4, 2}), F({2})); });
  add("cross_entropy/float_targets", {"cross_entropy"}, [] { return cross_entropy(F({3, 4}), F({3})); });
  add("cross_entropy/int64_logits", {"cross_entropy", "log_softmax"},
      [] { return cross_entropy(I({0, 1, 2, 3, 0, 1}, {2, 3}), I({0, 1}, {2})); });
  add("nll_loss/bool_targets", {"nll_loss"}, [] { return nll_loss(F({3, 4}), B({3})); });
  add("matmul/bool", {"matmul"}, [] { return matmul(B({2, 2}), B({2, 2})); });
  add("conv2d/int64_input", {"conv2d"}, [] { return conv2d(I(std::vector<int64_t>(75, 1), {1, 3, 5, 5}), F({2, 3, 3, 3})); });
  add("conv2d/f32_f64", {"conv2d"}, [] { return conv2d(F({1, 3, 5, 5}), D({2, 3, 3, 3})); });
  add("batch_norm/int64", {"batch_norm"}, [] {
    return batch_norm(I(std::vector<int64_t>(12, 1), {2, 3, 2}), F({3}), F({3}), F({3}), F({3}), true);
  });
  add("layer_norm/int64", {"layer_norm"}, [] { return layer_norm(I({1, 2, 3, 4, 5, 6}, {2, 3}), {3}); });
  add("masked_fill/float_mask", {"masked_fill"}, [] { return masked_fill(F({2, 3}), F({2, 3}), 1.0); });
  add("where/float_cond", {"where"}, [] { return where(F({2, 3}), F({2, 3}), F({2, 3})); });
  add("mse_loss/int64", {"mse_loss"}, [] { return mse_loss(I({1, 2}, {2}), I({2, 1}, {2})); });
  add("max_pool2d/int64", {"max_pool2d"}, [] { return max_pool2d(I(std::vector<int64_t>(16, 1), {1, 1, 4, 4}), 2); });
  add("avg_pool2d/bool", {"avg_pool2d"}, [] { return avg_pool2d(B({1, 1, 4, 4}), 2); });
  add("neg/bool", {"neg"}, [] { return -B({3}); });
  add("randn/int64", {"randn"}, [] { return randn({3}, DType::Int64); });
  add("rand/bool", {"rand"}, [] { return rand({3}, DType::Bool); });
  add("mean/int64", {"mean", "sum", "div"}, [] { return I({1, 2, 3}, {3}).mean(); });
  add("var/int64", {"var"}, [] { return var(I({1, 2, 3}, {3})); });
}

// Mixed dtypes eager promotes (torch refuses some: sub of bools, float added into int64): every mode
// must do the same.
void promotion_rows(const Adder& add) {
  add("matmul/f32_f64", {"matmul"}, [] { return matmul(F({2, 3}), D({3, 2})); });
  add("matmul/int64_f32", {"matmul"}, [] { return matmul(I({1, 2, 3, 4}, {2, 2}), F({2, 2})); });
  add("linear/f32_f64", {"linear", "matmul"}, [] { return linear(F({2, 3}), D({4, 3})); });
  add("sub/bool", {"sub"}, [] { return B({3}) - B({3}); });
  add("add_/float_into_int64", {"add_"}, [] { Tensor s = I({1, 2}, {2}); s.add_(F({2})); return s; });
  add("copy_/float_into_bool", {"copy_"}, [] { Tensor s = B({2}); s.copy_(F({2})); return s; });
  add("cat/f32_f64", {"cat"}, [] { return cat({F({2}), D({2})}, 0); });
  add("where/f32_f64", {"where"}, [] { return where(B({3}), F({3}), D({3})); });
  add("maximum/int64_f32", {"maximum"}, [] { return maximum(I({1, -2, 3}, {3}), F({3})); });
  add("exp/int64", {"exp"}, [] { return exp(I({0, 1, 2}, {3})); });
}

void index_rows(const Adder& add) {
  add("index_select/negative", {"index_select"}, [] { return index_select(F({3, 2}), 0, I({0, -1}, {2})); });
  add("index_select/too_big", {"index_select"}, [] { return index_select(F({3, 2}), 0, I({3}, {1})); });
  add("index_select/int64_max", {"index_select"}, [] { return index_select(F({3, 2}), 1, I({kMax}, {1})); });
  add("gather/too_big", {"gather"}, [] { return gather(F({3, 2}), 1, I({0, 2, 0}, {3, 1})); });
  add("gather/negative", {"gather"}, [] { return gather(F({3, 2}), 0, I({-1, 0}, {1, 2})); });
  add("embedding/too_big", {"embedding"}, [] { return embedding(F({4, 2}), I({1, 4}, {2})); });
  add("embedding/negative", {"embedding"}, [] { return embedding(F({4, 2}), I({-1}, {1})); });
  add("embedding/padding_idx", {"embedding"}, [] { return embedding(F({4, 2}), I({0}, {1}), 4); });
  add("cross_entropy/class_too_big", {"cross_entropy", "nll_loss"}, [] { return cross_entropy(F({2, 3}), I({0, 3}, {2})); });
  add("cross_entropy/class_negative", {"cross_entropy", "nll_loss"}, [] { return cross_entropy(F({2, 3}), I({0, -5}, {2})); });
  add("nll_loss/class_too_big", {"nll_loss"}, [] { return nll_loss(F({2, 3}), I({7, 0}, {2})); });
  add("nll_loss/class_int64_min", {"nll_loss"}, [] { return nll_loss(F({2, 3}), I({kMin, 0}, {2})); });
  // The gradients' scatters write where the indices say: out-of-range ones must be refused, not written.
  add("index_select_backward/too_big", {"index_select_backward"},
      [] { return index_select_backward(F({2, 2}), {3, 2}, 0, I({0, 3}, {2})); });
  add("gather_backward/too_big", {"gather_backward"},
      [] { return gather_backward(F({3, 1}), {3, 2}, 1, I({0, 2, 0}, {3, 1})); });
  add("embedding_backward/too_big", {"embedding_backward"}, [] { return embedding_backward(F({2, 2}), I({1, 4}, {2}), 4); });
  add("embedding_backward/negative", {"embedding_backward"},
      [] { return embedding_backward(F({2, 2}), I({-3, 1}, {2}), 4); });
  add("nll_loss_backward/too_big", {"nll_loss_backward", "nll_loss"},
      [] { return nll_loss_backward(F({}), I({0, 5}, {2}), {2, 3}, -100, 1); });
  add("max_pool2d_backward/too_big", {"max_pool2d_backward"},
      [] { return max_pool2d_backward(F({1, 1, 1, 1}), I({99}, {1, 1, 1, 1}), {1, 1, 2, 2}); });
  add("select/too_big", {"select"}, [] { return F({3}).select(0, 3); });
  add("select/negative", {"select"}, [] { return F({2, 3}).select(1, -4); });
}

void overflow_rows(const Adder& add) {
  add("reshape/product_overflow", {"reshape", "view"}, [] { return F({2}).reshape({int64_t(1) << 62, 4}); });
  add("reshape/huge_inferred", {"reshape", "view"}, [] { return F({2}).reshape({kMax, -1}); });
  add("zeros/product_overflow", {"zeros", "full"}, [] { return zeros({int64_t(1) << 32, int64_t(1) << 32}); });
  add("ones/product_overflow", {"ones", "full"}, [] { return ones({kMax, 2}); });
  add("full/product_overflow", {"full"}, [] { return full({int64_t(1) << 40, int64_t(1) << 40}, 1.0); });
  add("zeros/impossible_allocation", {"zeros", "full"}, [] { return zeros({int64_t(1) << 60}); });
  add("rand/product_overflow", {"rand"}, [] { return rand({int64_t(1) << 32, int64_t(1) << 32}); });
  add("randn/impossible_allocation", {"randn"}, [] { return randn({int64_t(1) << 61}); });
  add("randint/product_overflow", {"randint"}, [] { return randint(0, 10, {int64_t(1) << 32, int64_t(1) << 32}); });
  add("bernoulli_p/product_overflow", {"bernoulli", "bernoulli_p"},
      [] { return bernoulli(Shape{int64_t(1) << 32, int64_t(1) << 32}, 0.5); });
  add("expand/product_overflow", {"expand"}, [] { return F({1}).expand({int64_t(1) << 32, int64_t(1) << 32, 2}) * 1.0f; });
  add("arange/impossible_allocation", {"arange"}, [] { return arange(0, kMax, 1); });
  add("eye/product_overflow", {"eye"}, [] { return eye(int64_t(1) << 32); });
  add("select/int64_max", {"select"}, [] { return F({3}).select(0, kMax); });
  add("select/int64_min", {"select"}, [] { return F({3}).select(0, kMin); });
  add("upsample_nearest2d/huge_output", {"upsample_nearest2d"},
      [] { return upsample_nearest2d(F({1, 1, 2, 2}), Int2{int64_t(1) << 40, int64_t(1) << 40}); });
  add("adaptive_avg_pool2d/huge_output", {"adaptive_avg_pool2d"},
      [] { return adaptive_avg_pool2d(F({1, 1, 2, 2}), {int64_t(1) << 40, int64_t(1) << 40}); });
  add("conv2d/huge_padding", {"conv2d"}, [] {
    return conv2d(F({1, 1, 2, 2}), F({1, 1, 1, 1}), {}, {1, 1}, {int64_t(1) << 40, int64_t(1) << 40});
  });
  add("max_pool2d/huge_padding", {"max_pool2d"}, [] { return max_pool2d(F({1, 1, 4, 4}), 2, 2, int64_t(1) << 40); });
}

// Eager defines the answer: the same values, or the same error, in every mode.
void empty_rows(const Adder& add) {
  add("max_all/empty", {"max_all", "max"}, [] { return max(F({0})); });
  add("min_all/empty", {"min_all", "min"}, [] { return min(F({0, 2})); });
  add("argmax/empty", {"argmax"}, [] { return argmax(F({0, 3})); });
  add("mean/empty", {"mean", "sum", "div"}, [] { return F({0}).mean(); });
  add("sum/empty_dim", {"sum"}, [] { return F({0, 3}).sum({1}); });
  add("matmul/empty_rows", {"matmul"}, [] { return matmul(F({0, 3}), F({3, 4})); });
  add("matmul/empty_inner", {"matmul"}, [] { return matmul(F({2, 0}), F({0, 4})); });
  add("cross_entropy/empty_batch", {"cross_entropy", "nll_loss"}, [] { return cross_entropy(F({0, 3}), I({}, {0})); });
  add("softmax/empty", {"softmax"}, [] { return softmax(F({0, 3}), 1); });
  add("cat/with_empty", {"cat"}, [] { return cat({F({0, 3}), F({2, 3})}, 0); });
  add("index_select/empty_index", {"index_select"}, [] { return index_select(F({3, 2}), 0, I({}, {0})); });
  add("embedding/empty_index", {"embedding"}, [] { return embedding(F({4, 2}), I({}, {0})); });
  add("conv2d/empty_batch", {"conv2d"}, [] { return conv2d(F({0, 3, 5, 5}), F({2, 3, 3, 3})); });
  add("batch_norm/empty_batch", {"batch_norm"}, [] {
    return batch_norm(F({0, 3, 2, 2}), F({3}), F({3}), F({3}), F({3}), true);
  });
  add("layer_norm/empty", {"layer_norm"}, [] { return layer_norm(F({0, 3}), {3}); });
  add("max_pool2d/empty_batch", {"max_pool2d"}, [] { return max_pool2d(F({0, 1, 4, 4}), 2); });
  add("reshape/empty_inferred", {"reshape", "view"}, [] { return F({0, 3}).reshape({-1}); });
  add("reshape/empty_ambiguous", {"reshape", "view"}, [] { return F({0, 3}).reshape({0, -1}); });
  add("var/one_element", {"var"}, [] { return var(F({1})); });
  add("var/empty", {"var"}, [] { return var(F({0})); });
  add("mse_loss/empty", {"mse_loss"}, [] { return mse_loss(F({0}), F({0})); });
  add("rand/empty", {"rand"}, [] { return rand({0, 5}); });
}

void nan_rows(const Adder& add) {
  auto X = [] { return Fv({float(kNaN), 1.0f, float(kInf), -float(kInf), 0.0f, -2.0f}, {2, 3}); };
  add("max_all/nan", {"max_all", "max"}, [X] { return max(X()); });
  add("argmax/nan", {"argmax"}, [X] { return argmax(X(), 1); });
  add("relu/nan", {"relu"}, [X] { return relu(X()); });
  add("clamp/nan", {"clamp"}, [X] { return clamp(X(), -1.0, 1.0); });
  add("maximum/nan", {"maximum"}, [X] { return maximum(X(), F({2, 3})); });
  add("sign/nan", {"sign"}, [X] { return sign(X()); });
  add("eq/nan", {"eq"}, [X] { return eq(X(), X()); });
  add("softmax/inf_row", {"softmax"}, [X] { return softmax(X(), 1); });
  add("log/negative", {"log"}, [] { return log(Fv({-1.0f, 0.0f, 1.0f}, {3})); });
  add("sqrt/negative", {"sqrt"}, [] { return sqrt(Fv({-1.0f, 0.0f, 4.0f}, {3})); });
  add("div/by_zero", {"div"}, [] { return Fv({1.0f, 0.0f, -1.0f}, {3}) / Fv({0.0f, 0.0f, 0.0f}, {3}); });
  add("cross_entropy/inf_logits", {"cross_entropy", "nll_loss"}, [X] { return cross_entropy(X(), I({0, 2}, {2})); });
  add("layer_norm/inf", {"layer_norm"}, [X] { return layer_norm(X(), {3}); });
  add("matmul/inf_times_zero", {"matmul"}, [X] { return matmul(X(), F({3, 2}) * 0.0f); });
  add("sum/inf_minus_inf", {"sum"}, [X] { return X().sum(); });
  add("max_pool2d/nan", {"max_pool2d"}, [X] { return max_pool2d(X().reshape({1, 1, 2, 3}), 2, 1); });
  add("where/nan", {"where"}, [X] { return where(B({2, 3}), X(), 0.0); });
  add("embedding/nan_weight", {"embedding"}, [X] { return embedding(X(), I({1, 0}, {2})); });
  add("batch_norm/nan", {"batch_norm"}, [X] {
    return batch_norm(X().reshape({2, 3, 1, 1}), F({3}), F({3}), F({3}), F({3}), true);
  });
  add("mse_loss/inf", {"mse_loss"}, [X] { return mse_loss(X(), X()); });
  add("upsample_nearest2d/nan", {"upsample_nearest2d"}, [X] { return upsample_nearest2d(X().reshape({1, 1, 2, 3}), 2.0); });
  add("gelu/inf", {"gelu"}, [X] { return gelu(X()); });
  add("softplus/inf", {"softplus"}, [X] { return softplus(X()); });
  add("pow_scalar/nan", {"pow_scalar"}, [X] { return pow(X(), 0.5); });
  add("leaky_relu/nan", {"leaky_relu"}, [X] { return leaky_relu(X()); });
  add("sigmoid/inf", {"sigmoid"}, [X] { return sigmoid(X()); });
  add("tanh/inf", {"tanh"}, [X] { return tanh(X()); });
  add("abs/nan", {"abs"}, [X] { return abs(X()); });
  add("rsqrt/zero_inf", {"rsqrt"}, [X] { return rsqrt(X()); });
  add("logical_not/nan", {"logical_not"}, [X] { return logical_not(X()); });
  add("cast/nan_to_int64", {"cast"}, [X] { return X().to(DType::Int64); });
  add("fill_/nan", {"fill_"}, [] { Tensor t = F({3}); t.fill_(kNaN); return t; });
  add("min_all/nan", {"min_all", "min"}, [X] { return min(X()); });
}

}  // namespace

void add_hand_written_bad_cases(std::vector<BadCase>& out) {
  shape_rows(Adder{out, "shape", Expect::Error});
  dtype_rows(Adder{out, "dtype", Expect::Error});
  promotion_rows(Adder{out, "dtype", Expect::SameAsEager});
  index_rows(Adder{out, "index", Expect::Error});
  overflow_rows(Adder{out, "overflow", Expect::Error});
  empty_rows(Adder{out, "empty", Expect::SameAsEager});
  nan_rows(Adder{out, "nan", Expect::SameAsEager});
}

}  // namespace terra::testing
