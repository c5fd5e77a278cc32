// Indexing on the CPU: concatenation, index_select, gather, embedding and their scatter-add
// backwards. Index values are range-checked (serially, before any parallel work) by the kernels and
// by their check_values hooks alike, with one message.
#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "terra/backend/cpu/loops.h"
#include "terra/backend/indexing_kernels.h"
#include "terra/core/errors.h"

namespace terra::kernels {
namespace {

// Checks every index value (first bad one in row-major order) before any parallel work. Kernels
// and their check_values hooks both call it, so the message is the same wherever it is raised.
void check_range(const char* op, const Tensor& index, int64_t size, const std::string& what) {
  int64_t hit = 0;
  bool found = false;
  cpu::scan_values<int64_t>(*index.impl(), [&](int64_t v, int64_t) {
    found = v < 0 || v >= size;
    hit = v;
    return found;
  });
  if (found)
    op_error(op, "index " + std::to_string(hit) + " is out of range for " + what + " of size " + std::to_string(size));
}
std::string dim_str(int64_t dim) { return "dim " + std::to_string(dim); }

struct Layout3 {
  int64_t outer = 1, n = 1, inner = 1;
};
Layout3 around(const Shape& s, int64_t dim) {
  Layout3 l;
  for (int64_t d = 0; d < dim; ++d) l.outer *= s[size_t(d)];
  l.n = s[size_t(dim)];
  for (size_t d = size_t(dim) + 1; d < s.size(); ++d) l.inner *= s[d];
  return l;
}

// Calls f(out_flat, x_offset) for every index element, x_offset in x's (strided) elements. The
// indices were range-checked before.
template <class F>
void gather_walk(const Shape& x_strides, const Tensor& idx, int64_t dim, bool parallel, F&& f) {
  TensorImpl& it = *idx.impl();
  const int64_t* pi = it.data_as<int64_t>();
  int64_t n = it.numel;
  Shape out_st = contiguous_strides(it.shape), xs = x_strides;
  int64_t xdim_stride = xs[size_t(dim)];
  xs[size_t(dim)] = 0;
  std::array<const int64_t*, 3> st{out_st.data(), it.strides.data(), xs.data()};
  auto body = [&](int64_t b, int64_t e) {
    cpu::strided_range<3>(it.shape, st, b, e,
                          [&](const std::array<int64_t, 3>& o) { f(o[0], o[2] + pi[o[1]] * xdim_stride); });
  };
  if (parallel) cpu::parallel_for(n, cpu::kGrain, body);
  else body(0, n);
}

}  // namespace

void cat(const KernelArgs& k) {
  TensorImpl& o = *k.out[0].impl();
  int64_t dim = k.attrs.i("dim"), off = 0;
  for (const Tensor& t : k.in) {
    int64_t len = t.shape()[size_t(dim)];
    if (t.numel() > 0) {
      TensorImpl region;  // the slab of the output this input fills
      region.shape = t.shape();
      region.strides = o.strides;
      region.offset = o.offset + off * o.strides[size_t(dim)];
      region.numel = t.numel();
      region.dtype = o.dtype;
      region.storage = o.storage;
      cpu::copy_into(*t.impl(), region);
    }
    off += len;
  }
}

void index_select_values(std::span<const Tensor> in, const Attrs& a) {
  int64_t dim = a.i("dim");
  check_range("index_select", in[1], in[0].shape()[size_t(dim)], dim_str(dim));
}

void index_select(const KernelArgs& k) {
  index_select_values(k.in, k.attrs);
  Tensor x = cpu::contiguous_raw(k.in[0]), idx = cpu::contiguous_raw(k.in[1]);
  int64_t dim = k.attrs.i("dim");
  Layout3 l = around(x.shape(), dim);
  const int64_t* pi = idx.impl()->data_as<int64_t>();
  int64_t m = idx.numel();
  size_t es = itemsize(x.dtype()), row = size_t(l.inner) * es;
  const char* px = static_cast<const char*>(x.impl()->data());
  char* po = static_cast<char*>(k.out[0].impl()->data());
  if (!row) return;
  cpu::parallel_for(l.outer * m, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(l.inner, 1)),
                    [&](int64_t b, int64_t e) {
                      for (int64_t r = b; r < e; ++r) {
                        int64_t o = r / m, j = r % m;
                        std::memcpy(po + size_t(r) * row, px + size_t(o * l.n + pi[j]) * row, row);
                      }
                    });
}

void index_select_backward_values(std::span<const Tensor> in, const Attrs& a) {
  int64_t dim = a.i("dim");
  check_range("index_select_backward", in[1], a.ints("shape")[size_t(dim)], dim_str(dim));
}

void index_select_backward(const KernelArgs& k) {
  index_select_backward_values(k.in, k.attrs);
  Tensor g = cpu::contiguous_raw(k.in[0]), idx = cpu::contiguous_raw(k.in[1]);
  Tensor& out = k.out[0];
  int64_t dim = k.attrs.i("dim");
  Layout3 l = around(out.shape(), dim);
  const int64_t* pi = idx.impl()->data_as<int64_t>();
  int64_t m = idx.numel();
  cpu::zero_fill(*out.impl());
  visit_floating(out.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pg = g.impl()->data_as<T>();
    T* po = out.impl()->data_as<T>();
    // Parallel over `outer`: different outer slices never collide.
    cpu::parallel_for(l.outer, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(m * l.inner, 1)),
                      [&](int64_t b, int64_t e) {
                        for (int64_t o = b; o < e; ++o)
                          for (int64_t j = 0; j < m; ++j) {
                            const T* src = pg + (o * m + j) * l.inner;
                            T* dst = po + (o * l.n + pi[j]) * l.inner;
                            for (int64_t i = 0; i < l.inner; ++i) dst[i] += src[i];
                          }
                      });
  });
}

void gather_values(std::span<const Tensor> in, const Attrs& a) {
  int64_t dim = a.i("dim");
  check_range("gather", in[1], in[0].shape()[size_t(dim)], dim_str(dim));
}

void gather(const KernelArgs& k) {
  gather_values(k.in, k.attrs);
  TensorImpl& x = *k.in[0].impl();
  visit_dtype(x.dtype, [&](auto z) {
    using T = decltype(z);
    const T* px = x.data_as<T>();
    T* po = k.out[0].impl()->data_as<T>();
    gather_walk(x.strides, k.in[1], k.attrs.i("dim"), true, [&](int64_t oi, int64_t xo) { po[oi] = px[xo]; });
  });
}

void gather_backward_values(std::span<const Tensor> in, const Attrs& a) {
  int64_t dim = a.i("dim");
  check_range("gather_backward", in[1], a.ints("shape")[size_t(dim)], dim_str(dim));
}

void gather_backward(const KernelArgs& k) {
  gather_backward_values(k.in, k.attrs);
  Tensor g = cpu::contiguous_raw(k.in[0]);
  Tensor& out = k.out[0];
  cpu::zero_fill(*out.impl());
  TensorImpl& o = *out.impl();
  visit_floating(o.dtype, [&](auto z) {
    using T = decltype(z);
    const T* pg = g.impl()->data_as<T>();
    T* po = o.data_as<T>();
    // Serial: several index entries may hit the same element.
    gather_walk(o.strides, k.in[1], k.attrs.i("dim"), false, [&](int64_t gi, int64_t oo) { po[oo] += pg[gi]; });
  });
}

void embedding_values(std::span<const Tensor> in, const Attrs&) {
  check_range("embedding", in[1], in[0].shape()[0], "an embedding table");
}

void embedding(const KernelArgs& k) {
  embedding_values(k.in, k.attrs);
  Tensor w = cpu::contiguous_raw(k.in[0]), idx = cpu::contiguous_raw(k.in[1]);
  int64_t d = w.shape()[1], n = idx.numel();
  int64_t pad = k.attrs.i("padding_idx");
  bool mask = k.attrs.b("mask_padding");
  const int64_t* pi = idx.impl()->data_as<int64_t>();
  size_t row = size_t(d) * itemsize(w.dtype());
  const char* pw = static_cast<const char*>(w.impl()->data());
  char* po = static_cast<char*>(k.out[0].impl()->data());
  if (!row) return;
  cpu::parallel_for(n, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(d, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (mask && pi[i] == pad) std::memset(po + size_t(i) * row, 0, row);
      else std::memcpy(po + size_t(i) * row, pw + size_t(pi[i]) * row, row);
    }
  });
}

void embedding_backward_values(std::span<const Tensor> in, const Attrs& a) {
  check_range("embedding_backward", in[1], a.i("num"), "an embedding table");
}

void embedding_backward(const KernelArgs& k) {
  embedding_backward_values(k.in, k.attrs);
  Tensor g = cpu::contiguous_raw(k.in[0]), idx = cpu::contiguous_raw(k.in[1]);
  Tensor& out = k.out[0];
  int64_t d = out.shape()[1], n = idx.numel();
  int64_t pad = k.attrs.i("padding_idx");
  const int64_t* pi = idx.impl()->data_as<int64_t>();
  cpu::zero_fill(*out.impl());
  visit_floating(out.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pg = g.impl()->data_as<T>();
    T* po = out.impl()->data_as<T>();
    // Parallel over columns: rows repeat across indices, columns never collide.
    cpu::parallel_for(d, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t i = 0; i < n; ++i) {
        if (pi[i] == pad) continue;
        const T* src = pg + i * d;
        T* dst = po + pi[i] * d;
        for (int64_t c = b; c < e; ++c) dst[c] += src[c];
      }
    });
  });
}

}  // namespace terra::kernels
