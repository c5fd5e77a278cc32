// Sum on the CPU: sum_columns where the reduced dims are one block that is not innermost, else
// one row per output in sum_row's fixed lanes (backend/cpu/sum_loops.h).
#include <type_traits>
#include <vector>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/sum_loops.h"
#include "terra/backend/reduce_kernels.h"

namespace terra::kernels {

void sum(const KernelArgs& k) {
  const Tensor& x = k.in[0];
  visit_dtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    using Out = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    Out* o = k.out[0].impl()->data_as<Out>();
    const std::vector<int64_t>& dims = k.attrs.ints("dims");
    if (cpu::sum_columns<T, Acc, Out>(*x.impl(), dims, o)) return;
    cpu::reduce_rows<T>(x, dims, [&](const T* row, int64_t n, int64_t i) { o[i] = Out(cpu::sum_row<Acc>(row, n)); });
  });
}

}  // namespace terra::kernels
