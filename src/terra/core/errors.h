// How an op reports bad input: std::invalid_argument whose text starts with "[op]" and says what
// was wrong, with the shapes (the Python binding maps it to ValueError). One definition for ops/
// and the backends alike.
#pragma once
#include <string>

namespace terra {

class Tensor;

// Throws std::invalid_argument("[op] " + what).
[[noreturn]] void op_error(const char* op, const std::string& what);
// Throws "[op] input k is undefined" when `x` holds no tensor.
void need_defined(const char* op, const Tensor& x, int k = 0);

}  // namespace terra
