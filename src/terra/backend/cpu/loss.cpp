// Losses on the CPU: the class-index targets' check, nll_loss and its backward (serial loops in row
// order), and binary cross entropy with logits (elementwise loops).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/loss_kernels.h"

namespace terra::kernels {
namespace {

template <class T>
T stable_sigmoid(T x) {
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

}  // namespace

int64_t check_targets(const Tensor& targets, int64_t classes, int64_t ignore) {
  int64_t used = 0, bad = 0, pos = -1;
  cpu::scan_values<int64_t>(*targets.impl(), [&](int64_t v, int64_t i) {
    if (v == ignore) return false;
    if (v < 0 || v >= classes) {
      bad = v;
      pos = i;
      return true;
    }
    ++used;
    return false;
  });
  if (pos >= 0)
    throw std::invalid_argument("[nll_loss] target " + std::to_string(bad) + " at position " + std::to_string(pos) +
                                " is out of range for " + std::to_string(classes) + " classes");
  return used;
}

void nll_loss(const Tensor& input, const Tensor& targets, const XentShape& l, Tensor& out) {
  Tensor x = cpu::contiguous_raw(input), t = cpu::contiguous_raw(targets);
  const int64_t ignore = l.ignore, red = l.reduction, used = l.used;
  const int64_t* pt = t.impl()->data_as<int64_t>();
  visit_floating(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* px = x.impl()->data_as<T>();
    T* po = out.impl()->data_as<T>();
    double s = 0;
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t r = 0; r < l.r; ++r) {
        int64_t ti = pt[n * l.r + r];
        T v = ti == ignore ? T(0) : -px[(n * l.c + ti) * l.r + r];
        if (red == kNone) po[n * l.r + r] = v;
        else s += double(v);
      }
    if (red == kSum) po[0] = T(s);
    if (red == kMean) po[0] = T(s / double(used));  // 0/0 = NaN when every target is ignored, as torch
  });
}

void nll_loss_backward(const Tensor& grad, const Tensor& targets, const XentShape& l, Tensor& out) {
  Tensor g = cpu::contiguous_raw(grad), t = cpu::contiguous_raw(targets);
  const int64_t ignore = l.ignore, red = l.reduction, used = l.used;
  const int64_t* pt = t.impl()->data_as<int64_t>();
  cpu::zero_fill(*out.impl());
  visit_floating(out.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pg = g.impl()->data_as<T>();
    T* po = out.impl()->data_as<T>();
    T scale = red == kMean ? T(1.0 / double(used)) : T(1);
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t r = 0; r < l.r; ++r) {
        int64_t ti = pt[n * l.r + r];
        if (ti == ignore) continue;
        T gv = red == kNone ? pg[n * l.r + r] : pg[0];
        po[(n * l.c + ti) * l.r + r] = -gv * scale;
      }
  });
}

void binary_cross_entropy_with_logits(const KernelArgs& k) {
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::binary_loop<T, T, T>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(), [](T x, T t) {
      return std::max(x, T(0)) - x * t + std::log1p(std::exp(-std::fabs(x)));
    });
  });
}

void binary_cross_entropy_with_logits_backward(const KernelArgs& k) {
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::ternary_loop<T, T, T, T>(*k.in[0].impl(), *k.in[1].impl(), *k.in[2].impl(), *k.out[0].impl(),
                                  [](T g, T x, T t) { return g * (stable_sigmoid(x) - t); });
  });
}

}  // namespace terra::kernels
