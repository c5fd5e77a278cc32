// Activation kernels (ops/activations.cpp defines the ops); the backend folder provides them.
// Inputs arrive floating (relu: int64 too), out allocated with the input's shape and dtype.
#pragma once
#include "terra/core/op.h"

namespace terra::kernels {

// gelu's constants: its kernels' and its second derivative's (ops/activations.cpp, public ops).
inline constexpr double kSqrt2Pi = 0.79788456080286535588;     // sqrt(2/pi)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2 pi)
inline constexpr double kGeluC = 0.044715;

// out = exp(in[0]).
void exp(const KernelArgs& k);
// out = in[0] < 0 ? 0 : in[0] (NaN passes); int64 or floating.
void relu(const KernelArgs& k);
// out = in[0] > 0 ? in[0] : in[0] * attrs "negative_slope".
void leaky_relu(const KernelArgs& k);
// out = 0.5 x (1 + erf(x / sqrt(2))), or with attrs "tanh" 0.5 x (1 + tanh(sqrt(2/pi) (x + c x^3))).
void gelu(const KernelArgs& k);
// in: grad_out, x (equal shapes and dtypes)   out = grad_out * d gelu / dx (attrs "tanh" as gelu's).
void gelu_backward(const KernelArgs& k);
// out = 1 / (1 + exp(-in[0])) and tanh(in[0]).
void sigmoid(const KernelArgs& k);
void tanh(const KernelArgs& k);
// out = log(1 + exp(beta x)) / beta, or x where beta x > threshold. Attrs: beta, threshold.
void softplus(const KernelArgs& k);
// The element functions over float32 slices, for fused tiles (OpDef::tile_f32): the same
// arithmetic as the kernels above.
void tile_exp(const TileArgs& t);
void tile_relu(const TileArgs& t);
void tile_sigmoid(const TileArgs& t);
void tile_tanh(const TileArgs& t);

}  // namespace terra::kernels
