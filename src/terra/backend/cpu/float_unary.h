// The kernel of an elementwise op on floating tensors: unary_loop over its element function,
// forced inline so the loop vectorizes (vector_math.h). Shared by the activations and the
// elementwise math kernels.
#pragma once
#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/vector_math.h"
#include "terra/core/op.h"

namespace terra::cpu {

template <class F>
void float_unary(const KernelArgs& k, F f) {
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    unary_loop<T, T>(*k.in[0].impl(), *k.out[0].impl(), [f](T a) TERRA_VECTOR_LAMBDA { return static_cast<T>(f(a)); });
  });
}

}  // namespace terra::cpu
