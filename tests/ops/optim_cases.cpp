// Op-table rows for the optimizer ops (adam_step_scalars, sgd_dampening_factor): exact values of the
// host-double formulas, rounded once to the result dtype.
#include <cmath>

#include "ops/op_table.h"

namespace terra::testing {
namespace {

using V = Values;
using T = std::vector<Tensor>;

Input count(double t) { return {{}, DType::Float64, 0, 0, false, {t}}; }

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
}

}  // namespace terra::testing
