#include "terra/backend/cpu/loops.h"

#include <algorithm>
#include <cstring>

namespace terra::cpu {

Shape broadcast_strides(const TensorImpl& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  size_t off = shape.size() - t.shape.size();
  for (size_t d = 0; d < t.shape.size(); ++d)
    st[off + d] = t.shape[d] == 1 ? 0 : t.strides[d];
  return st;
}

namespace {

// Same-dtype strided copy, done as raw E-byte words: dims merged where both layouts allow, rows
// copied with a unit-stride inner loop, and transposes (the source's unit-stride dim is not the
// inner one) in 32x32 tiles so both sides stay in cache. Returns false for layouts it leaves to
// the generic loop.
template <class E>
bool copy_words(TensorImpl& src, TensorImpl& dst) {
  Shape bs = broadcast_strides(src, dst.shape);
  std::vector<int64_t> n, sd, ss;  // sizes, dst strides, src strides (outermost first), size-1 dims dropped
  for (size_t d = 0; d < dst.shape.size(); ++d)
    if (dst.shape[d] != 1) {
      if (!n.empty() && sd.back() == dst.strides[d] * dst.shape[d] && ss.back() == bs[d] * dst.shape[d]) {
        n.back() *= dst.shape[d];  // merges with the dim before it in both layouts
        sd.back() = dst.strides[d];
        ss.back() = bs[d];
        continue;
      }
      n.push_back(dst.shape[d]);
      sd.push_back(dst.strides[d]);
      ss.push_back(bs[d]);
    }
  const E* ps = static_cast<const E*>(src.data());  // data() points at the tensor's first element
  E* pd = static_cast<E*>(dst.data());
  const size_t r = n.size();
  if (r == 0) {
    pd[0] = ps[0];
    return true;
  }
  if (sd[r - 1] != 1) return false;
  // The dims other than the inner one (and the transposed one) are walked by an odometer.
  int64_t tdim = -1;  // a dim where the source has unit stride and the inner dim does not
  if (ss[r - 1] != 1 && ss[r - 1] != 0)
    for (size_t d = 0; d + 1 < r; ++d)
      if (ss[d] == 1) tdim = int64_t(d);
  if (ss[r - 1] != 1 && ss[r - 1] != 0 && tdim < 0) return false;
  std::vector<int64_t> outer;
  for (size_t d = 0; d + 1 < r; ++d)
    if (int64_t(d) != tdim) outer.push_back(int64_t(d));
  int64_t n_outer = 1;
  for (int64_t d : outer) n_outer *= n[size_t(d)];
  const int64_t inner = n[r - 1], sin = ss[r - 1];
  const int64_t rows = tdim >= 0 ? n[size_t(tdim)] : 1;
  parallel_for(n_outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner * rows, 1)), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      int64_t od = 0, os = 0, rem = o;
      for (size_t k = outer.size(); k-- > 0;) {
        size_t d = size_t(outer[k]);
        int64_t i = rem % n[d];
        rem /= n[d];
        od += i * sd[d];
        os += i * ss[d];
      }
      E* d0 = pd + od;
      const E* s0 = ps + os;
      if (tdim < 0) {
        if (sin == 1) std::memcpy(d0, s0, size_t(inner) * sizeof(E));
        else std::fill_n(d0, inner, s0[0]);
        continue;
      }
      const int64_t sdt = sd[size_t(tdim)];
      constexpr int64_t T = 32;
      for (int64_t jb = 0; jb < rows; jb += T)
        for (int64_t ib = 0; ib < inner; ib += T) {
          const int64_t je = std::min(rows, jb + T), ie = std::min(inner, ib + T);
          for (int64_t j = jb; j < je; ++j)
            for (int64_t i = ib; i < ie; ++i) d0[j * sdt + i] = s0[j + i * sin];
        }
    }
  });
  return true;
}

}  // namespace

void zero_fill(TensorImpl& t) {
  if (t.numel) std::memset(t.data(), 0, size_t(t.numel) * itemsize(t.dtype));  // no buffer when empty
}

void copy_into(TensorImpl& src, TensorImpl& dst) {
  if (dst.numel == 0) return;  // an empty tensor may have no buffer (memcpy of null is undefined)
  if (src.dtype == dst.dtype && dense(src, dst.numel) && dst.is_contiguous()) {
    std::memcpy(dst.data(), src.data(), size_t(dst.numel) * itemsize(dst.dtype));
    return;
  }
  if (src.dtype == dst.dtype) {
    switch (itemsize(dst.dtype)) {  // bit copies: the value of a word does not matter
      case 1: if (copy_words<uint8_t>(src, dst)) return; break;
      case 2: if (copy_words<uint16_t>(src, dst)) return; break;
      case 4: if (copy_words<uint32_t>(src, dst)) return; break;
      case 8: if (copy_words<uint64_t>(src, dst)) return; break;
      default: break;
    }
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
