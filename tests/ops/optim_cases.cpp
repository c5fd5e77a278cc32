// Op-table rows for the optimizer ops: adam_step_scalars and sgd_dampening_factor (exact values of
// the host-double formulas, rounded once to the result dtype) and the fused in-place updates (the
// update rules on doubles; optim_fused_test.cpp checks them bit for bit against the old op chains).
#include <cmath>
#include <functional>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;

Input count(double t) { return {{}, DType::Float64, 0, 0, false, {t}}; }
Input full(double lo = -2.0) { return {{3, 4}, DType::Float64, lo, 2.0, false}; }

// Runs an in-place update on a copy of x[0] and returns the copy.
Tensor updated(const Tensor& x0, const std::function<void(const Tensor&)>& f) {
  NoGradGuard ng;
  Tensor c = x0.detach().clone();
  f(c);
  return c;
}

}  // namespace

TERRA_OP_CASES(optim) {
  // {sqrt(1 - b2^t), -lr / (1 - b1^t)}: row per output and dtype; tol 0 = exact.
  for (DType d : {DType::Float64, DType::Float32}) {
    const bool f32 = d == DType::Float32;
    auto round = [f32](double v) { return f32 ? double(float(v)) : v; };
    add_case({.name = std::string("adam_step_scalars/bc2_sqrt/") + dtype_name(d),
              .ops = {"adam_step_scalars"},
              .inputs = {count(3), {{}, DType::Float64, 0, 0, false, {0.01}}},
              .fn = [d](const T& x) { return adam_step_scalars(x[0], x[1], 0.9, 0.999, d)[0]; },
              .reference = [round](const std::vector<V>& v) { return V{round(std::sqrt(1.0 - std::pow(0.999, v[0][0])))}; },
              .tol = 0,
              .gradcheck = false});
    add_case({.name = std::string("adam_step_scalars/step_size/") + dtype_name(d),
              .ops = {"adam_step_scalars"},
              .inputs = {count(7), {{}, DType::Float64, 0, 0, false, {0.003}}},
              .fn = [d](const T& x) { return adam_step_scalars(x[0], x[1], 0.8, 0.99, d)[1]; },
              .reference = [round](const std::vector<V>& v) { return V{round(-v[1][0] / (1.0 - std::pow(0.8, v[0][0])))}; },
              .tol = 0,
              .gradcheck = false});
    // First step: factor 1 (torch's buf = d); later steps 1 - dampening.
    for (double t : {1.0, 4.0})
      add_case({.name = std::string("sgd_dampening_factor/t") + std::to_string(int(t)) + "/" + dtype_name(d),
                .ops = {"sgd_dampening_factor"},
                .inputs = {count(t)},
                .fn = [d](const T& x) { return sgd_dampening_factor(x[0], 0.3, d); },
                .reference = [round](const std::vector<V>& v) { return V{v[0][0] == 1.0 ? 1.0 : round(1.0 - 0.3)}; },
                .tol = 0,
                .gradcheck = false});
  }

  // Fused updates, float64: d = g + 0.1 p (coupled weight decay) where a param is given.
  add_case({.name = "adam_exp_avg_/weight_decay", .ops = {"adam_exp_avg_"}, .inputs = {full(), full(), full()},
            .fn = [](const T& x) { return updated(x[0], [&](const Tensor& m) { adam_exp_avg_(m, x[1], 0.9, x[2], 0.1); }); },
            .reference = [](const std::vector<V>& v) {
              V o(v[0].size());
              for (size_t i = 0; i < o.size(); ++i) o[i] = v[0][i] * 0.9 + (v[1][i] + v[2][i] * 0.1) * (1.0 - 0.9);
              return o; },
            .tol = 1e-12, .gradcheck = false});
  add_case({.name = "adam_exp_avg_sq_", .ops = {"adam_exp_avg_sq_"}, .inputs = {full(0.0), full()},
            .fn = [](const T& x) { return updated(x[0], [&](const Tensor& s) { adam_exp_avg_sq_(s, x[1], 0.999); }); },
            .reference = [](const std::vector<V>& v) {
              V o(v[0].size());
              for (size_t i = 0; i < o.size(); ++i) o[i] = v[0][i] * 0.999 + v[1][i] * (v[1][i] * (1.0 - 0.999));
              return o; },
            .tol = 1e-12, .gradcheck = false});
  // AdamW: p (1 - lr wd) + m / (sqrt(v) / sqrt(1 - b2^t) + eps) * (-lr / (1 - b1^t)).
  add_case({.name = "adam_param_/decoupled", .ops = {"adam_param_"},
            .inputs = {full(), full(), full(0.1), count(3), {{}, DType::Float64, 0, 0, false, {0.01}}},
            .fn = [](const T& x) {
              return updated(x[0], [&](const Tensor& p) {
                adam_param_(p, x[1], x[2], adam_step_scalars(x[3], x[4], 0.9, 0.999, DType::Float64), 1e-8, x[4], 0.02);
              }); },
            .reference = [](const std::vector<V>& v) {
              const double lr = v[4][0], t = v[3][0];
              const double sc0 = std::sqrt(1.0 - std::pow(0.999, t)), sc1 = -lr / (1.0 - std::pow(0.9, t));
              V o(v[0].size());
              for (size_t i = 0; i < o.size(); ++i)
                o[i] = v[0][i] * (1.0 - lr * 0.02) + v[1][i] / (std::sqrt(v[2][i]) / sc0 + 1e-8) * sc1;
              return o; },
            .tol = 1e-12, .gradcheck = false});
  // Dampened momentum with weight decay, step 4: buf 0.9 + (g + 0.1 p) (1 - 0.3).
  add_case({.name = "sgd_momentum_/dampening", .ops = {"sgd_momentum_"}, .inputs = {full(), full(), full(), count(4)},
            .fn = [](const T& x) {
              return updated(x[0], [&](const Tensor& b) {
                sgd_momentum_(b, x[1], 0.9, sgd_dampening_factor(x[3], 0.3, DType::Float64), x[2], 0.1);
              }); },
            .reference = [](const std::vector<V>& v) {
              V o(v[0].size());
              for (size_t i = 0; i < o.size(); ++i) o[i] = v[0][i] * 0.9 + (v[1][i] + v[2][i] * 0.1) * (1.0 - 0.3);
              return o; },
            .tol = 1e-12, .gradcheck = false});
  // Nesterov: p - lr (g + wd p + momentum buf).
  add_case({.name = "sgd_param_/nesterov", .ops = {"sgd_param_"},
            .inputs = {full(), {{}, DType::Float64, 0, 0, false, {0.05}}, full(), full()},
            .fn = [](const T& x) { return updated(x[0], [&](const Tensor& p) { sgd_param_(p, x[1], x[2], x[3], 0.9, 0.01); }); },
            .reference = [](const std::vector<V>& v) {
              V o(v[0].size());
              for (size_t i = 0; i < o.size(); ++i)
                o[i] = v[0][i] + ((v[2][i] + v[0][i] * 0.01) + v[3][i] * 0.9) * -v[1][0];
              return o; },
            .tol = 1e-12, .gradcheck = false});
  // The whole update of two parameters in one op, the second one's result checked (row values are
  // one tensor): Adam with coupled weight decay from count 2 (t = 3 after the op), SGD Nesterov.
  add_case({.name = "fused_adam_/two_params", .ops = {"fused_adam_"},
            .inputs = {full(), full(), full(), full(), full(0.1), full(0.1), {{}, DType::Float64, 0, 0, false, {0.01}}},
            .fn = [](const T& x) {
              NoGradGuard ng;
              std::vector<Tensor> p{x[0].clone(), x[1].clone()}, m{x[2].clone(), x[3].clone()},
                  v{x[4].clone(), x[5].clone()}, t{scalar_tensor(2.0, DType::Float64), scalar_tensor(2.0, DType::Float64)};
              fused_adam_(p, {x[2], x[3]}, m, v, t, x[6], 0.9, 0.999, 1e-8, 0.1, false);
              return p[1]; },
            .reference = [](const std::vector<V>& v) {
              const double lr = v[6][0], t = 3.0;
              const double sc0 = std::sqrt(1.0 - std::pow(0.999, t)), sc1 = -lr / (1.0 - std::pow(0.9, t));
              V o(v[1].size());
              for (size_t i = 0; i < o.size(); ++i) {
                const double d = v[3][i] + v[1][i] * 0.1;  // grad (x[3]) + wd * param
                const double m = v[3][i] * 0.9 + d * (1.0 - 0.9), s = v[5][i] * 0.999 + d * (d * (1.0 - 0.999));
                o[i] = v[1][i] + m / (std::sqrt(s) / sc0 + 1e-8) * sc1;
              }
              return o; },
            .tol = 1e-12, .gradcheck = false});
  add_case({.name = "fused_sgd_/nesterov_two_params", .ops = {"fused_sgd_"},
            .inputs = {full(), full(), full(), full(), full(), full(), {{}, DType::Float64, 0, 0, false, {0.05}}},
            .fn = [](const T& x) {
              NoGradGuard ng;
              std::vector<Tensor> p{x[0].clone(), x[1].clone()}, b{x[4].clone(), x[5].clone()};
              fused_sgd_(p, {x[2], x[3]}, b, {}, x[6], 0.9, 0.0, 0.01, true);
              return p[1]; },
            .reference = [](const std::vector<V>& v) {
              V o(v[1].size());
              for (size_t i = 0; i < o.size(); ++i) {
                const double d = v[3][i] + v[1][i] * 0.01, buf = v[5][i] * 0.9 + d;
                o[i] = v[1][i] + (d + buf * 0.9) * -v[6][0];
              }
              return o; },
            .tol = 1e-12, .gradcheck = false});
}

}  // namespace terra::testing
