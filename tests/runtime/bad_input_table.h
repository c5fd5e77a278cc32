// The bad-input table: every op called with inputs it must refuse (wrong shapes, dtypes, indices,
// overflowing sizes) or must handle exactly as eager does (NaN/inf values, empty tensors), each in
// the middle of a small training program, in every Mode. See bad_input_table_test.cpp.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <terra/terra.h>

namespace terra::testing {

enum class Expect {
  Error,        // eager raises at the call: every mode raises the same type, message "[op] ..."
  SameAsEager,  // every mode does what eager does: the same values, or the same error
};

struct BadCase {
  std::string name;              // "matmul/inner_dims"
  std::string cls;               // shape | dtype | index | overflow | nan | empty
  std::vector<std::string> ops;  // accepted "[op]" prefixes of the message
  Expect expect = Expect::Error;
  std::function<Tensor()> call;  // builds its (host-fed) inputs and makes the call
};

// Hand-written rows (bad_input_cases.cpp) then rows derived from the op table (bad_input_derived.cpp).
void add_hand_written_bad_cases(std::vector<BadCase>& out);
void add_derived_bad_cases(std::vector<BadCase>& out);
const std::vector<BadCase>& bad_cases();

}  // namespace terra::testing
