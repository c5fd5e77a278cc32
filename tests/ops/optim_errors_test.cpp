// Bad input to the fused optimizer ops: a clear std::invalid_argument naming the op and the shapes
// or dtypes involved, raised before anything is written.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <terra/terra.h>

namespace terra {
namespace {

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one with " << parts[0];
  } catch (const std::invalid_argument& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

Tensor f64(double v) { return scalar_tensor(v, DType::Float64); }

// The one-op updates name the role and the parameter's index as well as the shapes.
TEST(OptimFusedErrors, OneOpUpdatesNameTheRoleAndTheParameter) {
  NoGradGuard ng;
  Tensor p0 = zeros({3, 4}), p1 = zeros({5}), lr = f64(0.1);
  std::vector<Tensor> ps{p0, p1}, ms{zeros({3, 4}), zeros({5})}, vs{zeros({3, 4}), zeros({5})},
      ts{f64(0.0), f64(0.0)};
  expect_error([&] { fused_adam_(ps, {zeros({3, 4}), zeros({6})}, ms, vs, ts, lr, 0.9, 0.999, 1e-8, 0.0, false); },
               {"[fused_adam_]", "grad 1", "[6]", "[5]"});
  expect_error([&] { fused_adam_(ps, {zeros({3, 4}), zeros({5})}, ms, {zeros({3, 4}), zeros({5}, DType::Float64)}, ts,
                                 lr, 0.9, 0.999, 1e-8, 0.0, false); },
               {"[fused_adam_]", "exp_avg_sq 1", "float64", "float32"});
  expect_error([&] { fused_adam_(ps, {zeros({3, 4}), zeros({5})}, ms, vs, {f64(0.0), zeros({})}, lr, 0.9, 0.999, 1e-8,
                                 0.0, false); },
               {"[fused_adam_]", "step count 1", "float64"});
  expect_error([&] { fused_sgd_(ps, {zeros({3, 4}), zeros({5})}, {zeros({4, 3}), zeros({5})}, {}, lr, 0.9, 0.0, 0.0,
                                false); },
               {"[fused_sgd_]", "momentum buffer 0", "[4, 3]", "[3, 4]"});
  expect_error([&] { fused_adam_(ps, {zeros({3, 4})}, ms, vs, ts, lr, 0.9, 0.999, 1e-8, 0.0, false); },
               {"[fused_adam_]", "grads", "1 tensors for 2 parameters"});
  EXPECT_EQ(p0.to_vector<float>(), std::vector<float>(12, 0.0f));  // nothing written
  EXPECT_EQ(ts[0].item<double>(), 0.0);
}

TEST(OptimFusedErrors, MismatchedShapesNameTheOpAndBothShapes) {
  NoGradGuard ng;
  Tensor m = zeros({3, 4}), g = zeros({4, 3}), p = zeros({3, 4});
  expect_error([&] { adam_exp_avg_(m, g, 0.9); }, {"[adam_exp_avg_]", "grad", "[4, 3]", "[3, 4]"});
  expect_error([&] { adam_exp_avg_sq_(m, zeros({3, 1}), 0.9); }, {"[adam_exp_avg_sq_]", "[3, 1]", "[3, 4]"});
  expect_error([&] { adam_exp_avg_(m, p, 0.9, zeros({12}), 0.1); }, {"[adam_exp_avg_]", "param", "[12]"});
  Tensor lr = f64(0.1), t = f64(1.0);
  auto sc = adam_step_scalars(t, lr, 0.9, 0.999, DType::Float32);
  expect_error([&] { adam_param_(p, zeros({3, 4}), zeros({4}), sc, 1e-8, lr); },
               {"[adam_param_]", "exp_avg_sq", "[4]", "[3, 4]"});
  expect_error([&] { sgd_momentum_(m, zeros({2}), 0.9); }, {"[sgd_momentum_]", "[2]", "[3, 4]"});
  expect_error([&] { sgd_momentum_(m, p, 0.9, Tensor(), zeros({1, 4}), 0.1); }, {"[sgd_momentum_]", "param", "[1, 4]"});
  expect_error([&] { sgd_param_(p, lr, zeros({5})); }, {"[sgd_param_]", "grad", "[5]", "[3, 4]"});
  expect_error([&] { sgd_param_(p, lr, Tensor(), zeros({4, 3}), 0.9); }, {"[sgd_param_]", "momentum buffer", "[4, 3]"});
  EXPECT_EQ(m.to_vector<float>(), std::vector<float>(12, 0.0f));  // nothing written
}

TEST(OptimFusedErrors, DtypesAndScalars) {
  NoGradGuard ng;
  Tensor p = zeros({2}), lr = f64(0.1), t = f64(1.0);
  expect_error([&] { adam_exp_avg_(p, zeros({2}, DType::Float64), 0.9); }, {"[adam_exp_avg_]", "float64", "float32"});
  expect_error([&] { adam_exp_avg_(zeros({2}, DType::Int64), zeros({2}, DType::Int64), 0.9); },
               {"[adam_exp_avg_]", "floating", "int64"});
  // Step scalars in another dtype than the parameter's.
  auto sc64 = adam_step_scalars(t, lr, 0.9, 0.999, DType::Float64);
  expect_error([&] { adam_param_(p, zeros({2}), zeros({2}), sc64, 1e-8, lr); }, {"[adam_param_]", "step scalar", "float32"});
  auto sc = adam_step_scalars(t, lr, 0.9, 0.999, DType::Float32);
  expect_error([&] { adam_param_(p, zeros({2}), zeros({2}), {sc[0]}, 1e-8, lr); }, {"[adam_param_]", "2 tensors"});
  expect_error([&] { adam_param_(p, zeros({2}), zeros({2}), sc, 1e-8, scalar_tensor(0.1)); },
               {"[adam_param_]", "learning rate", "float64"});
  expect_error([&] { sgd_param_(p, scalar_tensor(0.1), zeros({2})); }, {"[sgd_param_]", "learning rate", "float64"});
  expect_error([&] { sgd_param_(p, lr, Tensor()); }, {"[sgd_param_]", "grad or a momentum buffer"});
  expect_error([&] { sgd_momentum_(p, zeros({2}), 0.9, zeros({2})); }, {"[sgd_momentum_]", "dampening factor", "0-d"});
}

TEST(OptimFusedErrors, RefusedOnATensorThatRequiresGradOutsideNoGrad) {
  Tensor p = zeros({2}).requires_grad_();
  expect_error([&] { sgd_param_(p, f64(0.1), zeros({2})); }, {"[sgd_param_]", "requires grad"});
  NoGradGuard ng;
  sgd_param_(p, f64(0.1), ones({2}));
  EXPECT_EQ(p.detach().to_vector<float>(), (std::vector<float>{-0.1f, -0.1f}));
}

}  // namespace
}  // namespace terra
