// The table-driven op test. Each op group registers rows from its own *_cases.cpp file:
//   TERRA_OP_CASES(arith) { add_case({...}); }
// The runner (op_table_test.cpp) checks, for every row: forward values against the row's
// independent reference (plain loops on doubles), and, in float64, autograd's gradient against
// central finite differences. A coverage test fails for any registered op no row exercises.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <terra/terra.h>

namespace terra::testing {

using Values = std::vector<double>;  // row-major values of one tensor

struct Input {
  Shape shape;
  DType dtype = DType::Float64;
  double lo = -2.0, hi = 2.0;  // uniform range of generated values
  bool differentiable = true;  // gradcheck wrt this input (floating inputs only)
  Values fixed = {};           // use these values instead of random ones (indices, masks)
};

struct OpCase {
  std::string name;                                           // e.g. "add/broadcast"
  std::vector<std::string> ops;                               // registered op names it exercises
  std::vector<Input> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;       // the call under test
  std::function<Values(const std::vector<Values>&)> reference;  // null: gradcheck only
  double tol = 1e-9;     // forward tolerance (float64)
  bool gradcheck = true;
  double eps = 1e-6;     // finite-difference step
  double grad_tol = 1e-5;
};

void add_case(OpCase c);
const std::vector<OpCase>& all_cases();
// Random values for an Input (deterministic per case and input index).
Values make_values(const Input& in, uint64_t seed);
Tensor make_tensor(const Input& in, const Values& v);

struct CaseRegistrar {
  explicit CaseRegistrar(void (*f)()) { f(); }
};
#define TERRA_OP_CASES(group)                                               \
  static void terra_op_cases_##group();                                     \
  static ::terra::testing::CaseRegistrar terra_op_reg_##group(terra_op_cases_##group); \
  static void terra_op_cases_##group()

}  // namespace terra::testing
