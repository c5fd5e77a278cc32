// float32 convolutions on oneDNN (conv_dnnl.cpp), internal to the CPU backend: conv.cpp calls them,
// the tests and kernels_bench query and pin the layout rule.
#pragma once
#include <cstdint>
#include <string>

namespace terra::kernels::conv_dnnl {

// Geometry of the forward conv y[N,O,OH,OW] = conv(x[N,C,H,W], w[O,C/G,KH,KW]).
struct Geo {
  int64_t N, C, H, W, O, KH, KW, OH, OW, G, sh, sw, ph, pw, dh, dw;
};

// Plain NCHW/OIHW in and out (terra's tensors) on every path; the layouts below are what the
// oneDNN primitive itself runs on.
void forward(const Geo& g, const float* x, const float* w, const float* b, float* y);
void backward_data(const Geo& g, const float* gy, const float* w, float* gx);
void backward_weights(const Geo& g, const float* gy, const float* x, float* gw);

enum class Pass { Fwd, BwdData, BwdWeights };
// Plain: the primitive runs on terra's NCHW/OIHW memory (oneDNN picks gemm:jit). Blocked: it is
// created with format_tag::any (jit kernels on nChw8c-style layouts), its operands reordered in
// and its result reordered out around each call. Auto: the measured rule (use_blocked).
enum class Layout { Auto, Plain, Blocked };

// The rule for one single-threaded oneDNN call of geometry `g` (a batch slice).
bool use_blocked(Pass p, const Geo& g);

// Tests and benchmarks only: pins the layout of every later call (process-wide).
void set_layout(Layout l);
Layout layout();

// What a call of this pass and geometry would run: "blocked " or "plain " + oneDNN's
// implementation name (e.g. "blocked jit:avx2"), for the geometry of one batch slice.
std::string describe(Pass p, const Geo& g);

}  // namespace terra::kernels::conv_dnnl
