// How an op reports bad input: std::invalid_argument whose text starts with "[op]" and says what
// was wrong, with the shapes (the Python binding maps it to ValueError). One definition for ops/
// and the backends alike.
#pragma once
#include <string>

#include "terra/core/tensor.h"

namespace terra {

// Throws std::invalid_argument("[op] " + what).
[[noreturn]] void op_error(const char* op, const std::string& what);
// Throws "[op] input k is undefined" (out of line: the check below runs on every call of some ops).
[[noreturn]] void undefined_input(const char* op, int k);
inline void need_defined(const char* op, const Tensor& x, int k = 0) {
  if (!x.defined()) [[unlikely]] undefined_input(op, k);
}

}  // namespace terra
