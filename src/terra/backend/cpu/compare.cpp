// Comparisons, logical ops, where and masked_fill on the CPU: broadcast loops, and contiguous fast
// paths for where's common forms.
#include <cstdint>

#include "terra/backend/compare_kernels.h"
#include "terra/backend/cpu/loops.h"

namespace terra::kernels {
namespace {

template <class F>
void compare_kernel(const KernelArgs& k, F f) {
  visit_dtype(k.in[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::binary_loop<T, T, bool>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                                 [&](T a, T b) { return bool(f(a, b)); });
  });
}

// One select per element; a scalar side is read once. Pointers and scalars are the loop's own locals:
// read through the closure, they would be reloaded after every store (which may alias the closure),
// and the loop would stay scalar and branchy.
template <class T, bool ScalarA, bool ScalarB>
void where_dense(const uint8_t* pc, const T* pa, const T* pb, T* po, int64_t n) {
  cpu::parallel_for(n, cpu::kGrain, [pc, pa, pb, po](int64_t s, int64_t e) {
    const uint8_t* c = pc;
    const T *a = pa, *b = pb;
    T* o = po;
    const T va = ScalarA ? a[0] : T(), vb = ScalarB ? b[0] : T();
    for (int64_t i = s; i < e; ++i) {
      const T x = ScalarA ? va : a[i], y = ScalarB ? vb : b[i];  // both loaded: a select, not a branch
      o[i] = c[i] != 0 ? x : y;
    }
  });
}

}  // namespace

#define TERRA_COMPARE(NAME, EXPR) \
  void NAME(const KernelArgs& k) { compare_kernel(k, [](auto a, auto b) { return EXPR; }); }
TERRA_COMPARE(eq, a == b)
TERRA_COMPARE(ne, a != b)
TERRA_COMPARE(lt, a < b)
TERRA_COMPARE(le, a <= b)
TERRA_COMPARE(gt, a > b)
TERRA_COMPARE(ge, a >= b)
#undef TERRA_COMPARE

void logical_not(const KernelArgs& k) {
  visit_dtype(k.in[0].dtype(), [&](auto z) {
    using T = decltype(z);
    cpu::unary_loop<T, bool>(*k.in[0].impl(), *k.out[0].impl(), [](T a) { return a == T(0); });
  });
}
void logical_and(const KernelArgs& k) {
  cpu::binary_loop<bool, bool, bool>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                                     [](bool a, bool b) { return bool(a & b); });
}
void logical_or(const KernelArgs& k) {
  cpu::binary_loop<bool, bool, bool>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                                     [](bool a, bool b) { return bool(a | b); });
}

void where(const KernelArgs& k) {
  TensorImpl &c = *k.in[0].impl(), &a = *k.in[1].impl(), &b = *k.in[2].impl(), &o = *k.out[0].impl();
  const int64_t n = o.numel;
  visit_dtype(o.dtype, [&](auto z) {
    using T = decltype(z);
    // Mask read as bytes compared with 0: GCC vectorizes that select, not one on a loaded bool.
    const uint8_t* pc = c.data_as<uint8_t>();
    const T* pa = a.data_as<T>();
    const T* pb = b.data_as<T>();
    T* po = o.data_as<T>();
    // Contiguous fast paths for the common forms: where(c, x, y), where(c, x, 0), where(c, 0, x).
    if (cpu::dense(c, n) && o.is_contiguous()) {
      if (cpu::dense(a, n) && cpu::dense(b, n)) return where_dense<T, false, false>(pc, pa, pb, po, n);
      if (cpu::dense(a, n) && b.numel == 1) return where_dense<T, false, true>(pc, pa, pb, po, n);
      if (a.numel == 1 && cpu::dense(b, n)) return where_dense<T, true, false>(pc, pa, pb, po, n);
    }
    cpu::ternary_loop<bool, T, T, T>(c, a, b, o, [](bool m, T x, T y) { return m ? x : y; });
  });
}

void masked_fill(const KernelArgs& k) {
  double v = k.attrs.f("value");
  visit_dtype(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    const T val = static_cast<T>(v);
    cpu::binary_loop<T, uint8_t, T>(*k.in[0].impl(), *k.in[1].impl(), *k.out[0].impl(),
                                    [val](T a, uint8_t m) { return m != 0 ? val : a; });
  });
}

}  // namespace terra::kernels
