// Shapes, strides and the broadcasting rules shared by every op's shape inference.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace terra {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& s);
Shape contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"
// Numpy broadcasting; throws std::invalid_argument naming `op` when shapes do not broadcast.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Wraps a possibly negative dim into [0, rank); throws naming `op` when out of range.
int64_t wrap_dim(const char* op, int64_t dim, int64_t rank);

}  // namespace terra
