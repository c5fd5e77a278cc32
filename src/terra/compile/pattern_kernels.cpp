#include "terra/compile/pattern_kernels.h"

#include <cmath>
#include <cstring>

#include "terra/compile/fused_elementwise.h"

namespace terra::compile {
namespace {

using F = float* __restrict;
using CF = const float* __restrict;

float* ptr(std::span<const Tensor> s, size_t i) { return s[i].impl()->data_as<float>(); }
float scalar(std::span<const Tensor> s, size_t i) { return *s[i].impl()->data_as<float>(); }

// optim::Adam, first half (weight_decay 0):
//   m.mul_(b1); m.add_(g * (1 - b1)); v.mul_(b2); v += g * (g * (1 - b2))
void adam_moments(std::span<const Tensor> s, int64_t b, int64_t e) {
  F m = ptr(s, 0);
  CF g2 = ptr(s, 2);
  F v = ptr(s, 5);
  CF g7 = ptr(s, 7);
  CF g10 = ptr(s, 10);
  const float b1 = scalar(s, 1), c1 = scalar(s, 3), b2 = scalar(s, 6), c2 = scalar(s, 8);
  for (int64_t i = b; i < e; ++i) {
    float mi = m[i] * b1;
    const float t4 = g2[i] * c1;
    m[i] = mi + t4;
    float vi = v[i] * b2;
    const float t9 = g7[i] * c2;
    const float t11 = g10[i] * t9;
    v[i] = vi + t11;
  }
}

// optim::Adam, second half: p += (m / (sqrt(v) / sc0 + eps)) * sc1
void adam_update(std::span<const Tensor> s, int64_t b, int64_t e) {
  CF v = ptr(s, 0);
  CF m = ptr(s, 6);
  F p = ptr(s, 10);
  const float sc0 = scalar(s, 2), eps = scalar(s, 4), sc1 = scalar(s, 8);
  for (int64_t i = b; i < e; ++i) {
    const float d = std::sqrt(v[i]) / sc0 + eps;
    const float r = (m[i] / d) * sc1;
    p[i] = p[i] + r;
  }
}

const Pattern kPatterns[] = {
    {"adam_moments", adam_moments,
     "%0=mul_(%0,%1) %4=mul(%2,%3) %0=add_(%0,%4) %5=mul_(%5,%6) %9=mul(%7,%8) %11=mul(%10,%9) %5=add_(%5,%11)",
     "wsfstwsfstft"},
    {"adam_update", adam_update, "%1=sqrt(%0) %3=div(%1,%2) %5=add(%3,%4) %7=div(%6,%5) %9=mul(%7,%8) %10=add_(%10,%9)",
     "ftststftstw"},
};

}  // namespace

const Pattern* find_pattern(const FusedKernel& k) {
  const std::string sig = k.signature();
  for (const Pattern& p : kPatterns)
    if (sig == p.ops && std::strlen(p.slots) == k.slot_dtype.size()) return &p;
  return nullptr;
}

bool pattern_applies(const Pattern& p, const FusedKernel& k, std::span<const Tensor> slots) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (k.slot_dtype[i] != DType::Float32) return false;
    const Tensor& t = slots[i];
    switch (p.slots[i]) {
      case 't':
        if (t.defined()) return false;  // someone reads it later: the generic path writes it out
        break;
      case 's':
        if (!t.defined() || t.impl()->numel != 1 || t.impl()->dtype != DType::Float32) return false;
        break;
      default:
        if (!t.defined() || t.impl()->numel != k.numel || !t.impl()->is_contiguous() ||
            t.impl()->dtype != DType::Float32)
          return false;
    }
  }
  // A written slot shares storage with no other full-size slot (read-only slots may alias).
  for (size_t i = 0; i < slots.size(); ++i)
    for (size_t j = 0; p.slots[i] == 'w' && j < slots.size(); ++j)
      if (j != i && (p.slots[j] == 'f' || p.slots[j] == 'w') && slots[j].impl()->storage == slots[i].impl()->storage)
        return false;
  return true;
}

}  // namespace terra::compile
