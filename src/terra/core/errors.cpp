#include "terra/core/errors.h"

#include <stdexcept>

namespace terra {

void op_error(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string("[") + op + "] " + what);
}

void undefined_input(const char* op, int k) { op_error(op, "input " + std::to_string(k) + " is undefined"); }

}  // namespace terra
