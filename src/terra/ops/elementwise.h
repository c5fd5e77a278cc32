// Elementwise math, comparisons, selection and activations. Binary forms broadcast and promote
// their operands (promote_pair); integer inputs of transcendental ops are computed in float32.
// Note: these names shadow <cmath>'s inside namespace terra; kernels call std::exp etc. explicitly.
#pragma once
#include <optional>

#include "terra/core/tensor.h"

namespace terra {

// Math (elementwise_math.cpp).
Tensor pow(const Tensor& base, const Tensor& exponent);
Tensor pow(const Tensor& base, double exponent);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);  // -1, 0, 1 (zero gradient)
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor maximum(const Tensor& a, const Tensor& b);  // ties split the gradient half/half, as torch
Tensor minimum(const Tensor& a, const Tensor& b);

// Comparisons and selection (compare.cpp). Comparisons return DType::Bool.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor logical_not(const Tensor& x);  // any dtype; true where x == 0
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
// cond must be bool; all three broadcast; a and b are promoted to a common dtype.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
// x with `value` where mask (bool, broadcastable to x's shape) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);

// Activations (activations.cpp).
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
// grad_out * d gelu(x)/dx in one kernel: gelu's gradient (itself twice differentiable).
Tensor gelu_backward(const Tensor& grad_out, const Tensor& x, bool tanh_approximation = false);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);

}  // namespace terra
