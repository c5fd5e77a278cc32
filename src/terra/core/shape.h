// Shapes, strides and the broadcasting rules shared by every op's shape inference.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "terra/core/small_vector.h"

namespace terra {

// Inline room for 6 dims covers every shape the programs build (NCHW + a couple): no malloc per op.
using Shape = SmallVector<int64_t, 6>;

// Element count; throws std::invalid_argument when the dims' product overflows int64 (zero dims
// count as 1 for that check, so every contiguous stride of a valid shape fits as well).
int64_t numel_of(const Shape& s);
int64_t numel_of(const char* op, const Shape& s);
// Validates a shape an op is about to produce: no negative dim, and numel and numel * itemsize
// fit in int64. Throws std::invalid_argument("[op] ... shape [..] ...").
void check_shape(const char* op, const Shape& s, size_t itemsize = 1);
// a * b and a + b, or std::invalid_argument("[op] <what> overflows int64") when they do not fit.
int64_t checked_mul(const char* op, int64_t a, int64_t b, const std::string& what);
int64_t checked_add(const char* op, int64_t a, int64_t b, const std::string& what);
Shape contiguous_strides(const Shape& s);
// Fills `strides` with s's contiguous strides and returns numel_of(s), in one pass (the layout
// of every new output: eager's empty() and the graph modes' placeholders).
int64_t contiguous_layout(const Shape& s, Shape& strides);
std::string shape_str(const Shape& s);  // "[2, 3]"
// gtest prints a Shape through this (found by ADL), e.g. in a failing EXPECT_EQ.
void PrintTo(const Shape& s, std::ostream* os);
// Numpy broadcasting; throws std::invalid_argument naming `op` when shapes do not broadcast.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Wraps a possibly negative dim into [0, rank); throws std::out_of_range naming `op` when out of range.
int64_t wrap_dim(const char* op, int64_t dim, int64_t rank);

}  // namespace terra
