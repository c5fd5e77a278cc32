// Element types and type promotion.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace terra {

enum class DType { Float32, Float64, Int64, Bool };

constexpr size_t itemsize(DType d) {
  switch (d) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}
constexpr bool is_floating(DType d) { return d == DType::Float32 || d == DType::Float64; }
const char* dtype_name(DType d);
// Promotion order Bool < Int64 < Float32 < Float64, as torch does for tensor-tensor ops.
DType promote(DType a, DType b);

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };

// Calls f(T{}) with T the C++ type that stores `d` (bool is stored as bool, one byte).
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
  }
  return f(float{});
}
template <class F>
decltype(auto) visit_floating(DType d, F&& f) {
  if (d == DType::Float64) return f(double{});
  return f(float{});
}

}  // namespace terra
