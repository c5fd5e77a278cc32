// Arithmetic: add, sub, mul, div, neg, their scalar and in-place forms, and the C++ operators.
#pragma once
#include "terra/core/tensor.h"

namespace terra {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor neg(const Tensor& a);

// Scalar operand as a 0-d tensor of the dtype the op runs in (torch's rule: a Python scalar does
// not widen a float tensor; it makes an integer tensor float).
Tensor scalar_like(const Tensor& t, double v);
// Casts both operands to their promoted dtype.
void promote_pair(Tensor& a, Tensor& b);

// In place on `self` (self's shape and dtype are kept; `other` broadcasts to self).
void add_inplace(const Tensor& self, const Tensor& other);
void sub_inplace(const Tensor& self, const Tensor& other);
void mul_inplace(const Tensor& self, const Tensor& other);
void div_inplace(const Tensor& self, const Tensor& other);
void copy_inplace(const Tensor& self, const Tensor& src);
void fill_inplace(const Tensor& self, double value);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

}  // namespace terra
