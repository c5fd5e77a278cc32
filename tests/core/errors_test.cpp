#include "terra/core/errors.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "terra/ops/creation.h"

namespace terra {
namespace {

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no std::invalid_argument";
}

TEST(OpErrors, OpErrorThrowsInvalidArgumentNamingTheOp) {
  EXPECT_EQ(message_of([] { op_error("gather", "index 5 is out of range for dim 0 of size 3"); }),
            "[gather] index 5 is out of range for dim 0 of size 3");
}

TEST(OpErrors, NeedDefinedNamesTheUndefinedInput) {
  EXPECT_EQ(message_of([] { need_defined("clamp", Tensor(), 2); }), "[clamp] input 2 is undefined");
  EXPECT_EQ(message_of([] { need_defined("max", Tensor()); }), "[max] input 0 is undefined");
  EXPECT_NO_THROW(need_defined("max", full({2}, 1.0f)));
}

}  // namespace
}  // namespace terra
