// Implementation of reduce_rows (included by loops.h).
#pragma once
#include <algorithm>

namespace terra::cpu {

template <class T, class F>
void reduce_rows(const Tensor& in, const std::vector<int64_t>& dims, F&& f) {
  TensorImpl& t = *in.impl();
  const int64_t rank = int64_t(t.shape.size());
  std::vector<bool> red(size_t(rank), false);
  for (int64_t d : dims) red[size_t(d)] = true;
  // Permute the reduced dims last; then each output is one contiguous run of R elements.
  Shape perm_shape, perm_strides;
  int64_t K = 1, R = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (!red[size_t(d)]) {
      perm_shape.push_back(t.shape[size_t(d)]);
      perm_strides.push_back(t.strides[size_t(d)]);
      K *= t.shape[size_t(d)];
    }
  for (int64_t d = 0; d < rank; ++d)
    if (red[size_t(d)]) {
      perm_shape.push_back(t.shape[size_t(d)]);
      perm_strides.push_back(t.strides[size_t(d)]);
      R *= t.shape[size_t(d)];
    }
  bool compact = true;
  int64_t expect = 1;
  for (size_t d = perm_shape.size(); d-- > 0;) {
    if (perm_shape[d] != 1 && perm_strides[d] != expect) compact = false;
    expect *= perm_shape[d];
  }
  const T* src = t.data_as<T>();
  Tensor tmp;
  if (!compact) {
    tmp = empty(perm_shape, t.dtype);
    TensorImpl view;
    view.shape = perm_shape;
    view.strides = perm_strides;
    view.offset = t.offset;
    view.numel = t.numel;
    view.dtype = t.dtype;
    view.storage = t.storage;
    copy_into(view, *tmp.impl());
    src = tmp.impl()->data_as<T>();
  }
  if (K >= 4 || R < kGrain) {
    parallel_for(K, std::max<int64_t>(1, kGrain / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) f(src + k * R, R, k);
    });
  } else {
    for (int64_t k = 0; k < K; ++k) f(src + k * R, R, k);
  }
}

}  // namespace terra::cpu
