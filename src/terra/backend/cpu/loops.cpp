#include "terra/backend/cpu/loops.h"

#include <cstring>

namespace terra::cpu {

Shape broadcast_strides(const TensorImpl& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  size_t off = shape.size() - t.shape.size();
  for (size_t d = 0; d < t.shape.size(); ++d)
    st[off + d] = t.shape[d] == 1 ? 0 : t.strides[d];
  return st;
}

void copy_into(TensorImpl& src, TensorImpl& dst) {
  if (dst.numel == 0) return;  // an empty tensor may have no buffer (memcpy of null is undefined)
  if (src.dtype == dst.dtype && dense(src, dst.numel) && dst.is_contiguous()) {
    std::memcpy(dst.data(), src.data(), size_t(dst.numel) * itemsize(dst.dtype));
    return;
  }
  visit_dtype(src.dtype, [&](auto s) {
    using S = decltype(s);
    visit_dtype(dst.dtype, [&](auto d) {
      using D = decltype(d);
      unary_loop<S, D>(src, dst, [](S v) { return static_cast<D>(v); });
    });
  });
}

Tensor contiguous_raw(const Tensor& src) {
  if (src.is_contiguous()) return src;
  Tensor out = empty(src.shape(), src.dtype());
  copy_into(*src.impl(), *out.impl());
  return out;
}

}  // namespace terra::cpu
