// Tensors from host data (feed points) and factory ops.
#pragma once
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "terra/core/tensor.h"

namespace terra {

// Host data: an external value, a feed point in graph modes.
Tensor tensor(std::vector<float> values, Shape shape);
Tensor tensor_f64(std::vector<double> values, Shape shape);
Tensor tensor(std::vector<int64_t> values, Shape shape);
Tensor tensor_bool(std::vector<bool> values, Shape shape);
Tensor scalar_tensor(double value, DType dtype = DType::Float32);
// Braced lists: tensor({1.f, 2.f}, {2}) is float32, tensor({1, 2}, {2}) int64, doubles become float32.
template <class T>
Tensor tensor(std::initializer_list<T> values, Shape shape) {
  if constexpr (std::is_same_v<T, bool>) {
    return tensor_bool(std::vector<bool>(values), std::move(shape));
  } else if constexpr (std::is_floating_point_v<T>) {
    return tensor(std::vector<float>(values.begin(), values.end()), std::move(shape));
  } else {
    return tensor(std::vector<int64_t>(values.begin(), values.end()), std::move(shape));
  }
}

Tensor zeros(Shape shape, DType dtype = DType::Float32);
Tensor ones(Shape shape, DType dtype = DType::Float32);
Tensor full(Shape shape, double value, DType dtype = DType::Float32);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor arange(int64_t n);
Tensor arange(int64_t start, int64_t end, int64_t step = 1, DType dtype = DType::Int64);
// n x m identity (m = -1: square).
Tensor eye(int64_t n, int64_t m = -1, DType dtype = DType::Float32);

}  // namespace terra
