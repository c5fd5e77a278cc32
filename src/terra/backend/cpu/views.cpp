// The view ops' copies on the CPU.
#include "terra/backend/cpu/loops.h"
#include "terra/backend/views_kernels.h"

namespace terra::kernels {

void copy(const KernelArgs& k) { cpu::copy_into(*k.in[0].impl(), *k.out[0].impl()); }

void slice_backward(const Tensor& grad, Tensor& out, const Tensor& region) {
  cpu::zero_fill(*out.impl());
  cpu::copy_into(*grad.impl(), *region.impl());
}

}  // namespace terra::kernels
