// Rows of the bad-input table derived from every op-table row (tests/ops/*_cases.cpp), so every
// registered op gets them: NaN/inf values, empty (0-sized) inputs, int64 or bool where the row feeds
// floats, and mixed float32/float64. Each must do in every mode exactly what it does in eager.
#include <cmath>
#include <limits>

#include "ops/op_table.h"
#include "runtime/bad_input_table.h"

namespace terra::testing {
namespace {

enum class Variant { NaN, Empty, Int64, Bool, Mixed };

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::NaN: return "nan";
    case Variant::Empty: return "empty";
    case Variant::Int64: return "int64";
    case Variant::Bool: return "bool";
    case Variant::Mixed: return "mixed_f32_f64";
  }
  return "?";
}

// The row's inputs changed by the variant, or false if the variant does not apply to the row.
bool transform(const OpCase& c, Variant v, std::vector<Input>& ins, std::vector<Values>& vals) {
  ins = c.inputs;
  vals.clear();
  for (size_t k = 0; k < ins.size(); ++k) vals.push_back(make_values(ins[k], 1000 + k));
  bool changed = false;
  int floating_seen = 0;
  for (size_t k = 0; k < ins.size(); ++k) {
    Input& in = ins[k];
    bool fl = is_floating(in.dtype);
    switch (v) {
      case Variant::NaN:
        if (!fl) break;
        for (size_t i = 0; i < vals[k].size() && i < 3; ++i)
          vals[k][i] = i == 0 ? std::numeric_limits<double>::quiet_NaN()
                              : (i == 1 ? 1.0 : -1.0) * std::numeric_limits<double>::infinity();
        changed |= !vals[k].empty();
        break;
      case Variant::Empty:
        if (!in.fixed.empty()) return false;  // fixed values (indices, masks) fit only their shape
        if (in.shape.empty()) break;
        in.shape[0] = 0;
        vals[k].clear();
        changed = true;
        break;
      case Variant::Int64:
      case Variant::Bool:
        if (!fl) break;
        in.dtype = v == Variant::Int64 ? DType::Int64 : DType::Bool;
        for (auto& x : vals[k]) x = v == Variant::Int64 ? std::floor(x) : (x > 0 ? 1 : 0);
        changed = true;
        break;
      case Variant::Mixed:
        if (!fl || floating_seen++ != 1) break;
        in.dtype = in.dtype == DType::Float64 ? DType::Float32 : DType::Float64;
        changed = true;
        break;
    }
  }
  return changed;
}

}  // namespace

void add_derived_bad_cases(std::vector<BadCase>& out) {
  const auto& rows = all_cases();
  for (size_t r = 0; r < rows.size(); ++r) {
    for (Variant v : {Variant::NaN, Variant::Empty, Variant::Int64, Variant::Bool, Variant::Mixed}) {
      std::vector<Input> ins;
      std::vector<Values> vals;
      if (!transform(rows[r], v, ins, vals)) continue;
      // The row indexes split's pieces by position: an empty input has one piece (as in torch), so
      // the row itself, not terra, would read past its vector.
      if (v == Variant::Empty && rows[r].name == "split/size") continue;
      const char* cls = v == Variant::NaN ? "nan" : v == Variant::Empty ? "empty" : "dtype";
      out.push_back(BadCase{rows[r].name + "/" + variant_name(v), cls, rows[r].ops, Expect::SameAsEager,
                            [r, ins, vals] {
                              std::vector<Tensor> ts;
                              for (size_t k = 0; k < ins.size(); ++k) ts.push_back(make_tensor(ins[k], vals[k]));
                              return all_cases()[r].fn(ts);
                            }});
    }
  }
}

const std::vector<BadCase>& bad_cases() {
  static const std::vector<BadCase> cases = [] {
    std::vector<BadCase> c;
    add_hand_written_bad_cases(c);
    add_derived_bad_cases(c);
    return c;
  }();
  return cases;
}

}  // namespace terra::testing
