#include "terra/core/errors.h"

#include <stdexcept>

#include "terra/core/tensor.h"

namespace terra {

void op_error(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string("[") + op + "] " + what);
}

void need_defined(const char* op, const Tensor& x, int k) {
  if (!x.defined()) op_error(op, "input " + std::to_string(k) + " is undefined");
}

}  // namespace terra
