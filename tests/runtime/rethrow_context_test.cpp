// An error the GraphRunner computed reaches the program as the class eager would have raised, with
// the runner's context appended: rethrow_with_context must keep every class it is given (Python maps
// each to its own exception: OutOfMemory to terra.OutOfMemoryError, out_of_range to IndexError...).
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "terra/core/allocator.h"
#include "terra/runtime/channel.h"

using terra::OutOfMemory;
using terra::runtime::rethrow_with_context;

namespace {

// Rethrows `e` through rethrow_with_context and checks the exact dynamic class and message.
template <class E>
void expect_kept(const E& e, const std::string& expect_what) {
  std::exception_ptr err = std::make_exception_ptr(e);
  try {
    rethrow_with_context(err, " (in op 7)");
  } catch (const std::exception& got) {
    EXPECT_EQ(std::string(typeid(got).name()), std::string(typeid(E).name())) << expect_what;
    EXPECT_EQ(std::string(got.what()), expect_what);
    return;
  }
  ADD_FAILURE() << "nothing was thrown for " << typeid(E).name();
}

TEST(RethrowWithContext, KeepsEveryStandardClassAndAppendsTheContext) {
  expect_kept(std::invalid_argument("[add] bad shapes"), "[add] bad shapes (in op 7)");
  expect_kept(std::out_of_range("[softmax] dim 2"), "[softmax] dim 2 (in op 7)");
  expect_kept(std::domain_error("d"), "d (in op 7)");
  expect_kept(std::length_error("l"), "l (in op 7)");
  expect_kept(std::logic_error("logic"), "logic (in op 7)");
  expect_kept(std::overflow_error("o"), "o (in op 7)");
  expect_kept(std::underflow_error("u"), "u (in op 7)");
  expect_kept(std::range_error("r"), "r (in op 7)");
  expect_kept(std::runtime_error("rt"), "rt (in op 7)");
}

TEST(RethrowWithContext, KeepsOutOfMemory) {
  // A runtime_error subclass: caught as runtime_error it would lose its class (and Python's
  // terra.OutOfMemoryError would become a plain RuntimeError).
  expect_kept(OutOfMemory("[matmul] cannot allocate 8 bytes"), "[matmul] cannot allocate 8 bytes (in op 7)");
  try {
    rethrow_with_context(std::make_exception_ptr(OutOfMemory("x")), "!");
  } catch (const OutOfMemory& e) {
    EXPECT_STREQ(e.what(), "x!");
    return;
  } catch (...) {
  }
  ADD_FAILURE() << "OutOfMemory was not rethrown as OutOfMemory";
}

TEST(RethrowWithContext, OtherClassesPassThroughUnchanged) {
  // Classes it cannot rebuild with a message are rethrown as they are.
  bool bad_alloc_kept = false;
  try {
    rethrow_with_context(std::make_exception_ptr(std::bad_alloc()), " (ctx)");
  } catch (const std::bad_alloc&) {
    bad_alloc_kept = true;
  } catch (...) {
  }
  EXPECT_TRUE(bad_alloc_kept);
  int got = 0;
  try {
    rethrow_with_context(std::make_exception_ptr(42), " (ctx)");
  } catch (int v) {
    got = v;
  }
  EXPECT_EQ(got, 42);
}

}  // namespace
