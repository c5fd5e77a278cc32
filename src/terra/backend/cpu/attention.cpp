// Fused scaled-dot-product attention on the CPU. Work items are (batch entry, block of query rows)
// forward and batch entries backward; each item runs its products as single-threaded sgemms
// (float32, oneDNN) or plain loops (float64), so an item computes the same bits on any thread and
// for any thread count. Forward keeps one block of scores (written straight into the saved
// weights when a gradient needs them, else in a per-thread buffer), never [..., Sq, Sk] scores,
// masked scores and exponentials as separate tensors.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "terra/backend/attention_kernels.h"
#include "terra/backend/cpu/dnnl_common.h"
#include "terra/backend/cpu/loops.h"
#include "terra/backend/cpu/vector_math.h"

namespace terra::kernels {
namespace {

// Scores per forward work item: 16 Ki floats (64 KiB) stay in L2 between the two products.
constexpr int64_t kBlockScores = 16384;
// Multiply-adds below which the op stays on the calling thread (waking workers costs more).
constexpr int64_t kSplitMacs = int64_t(1) << 17;
// Per-thread scratch kept between calls up to this many bytes (no allocation per op in steady
// state); a larger one (a huge backward without a scores output) is freed after its chunk.
constexpr size_t kKeepScratchBytes = size_t(4) << 20;

template <class T>
T* scratch(std::vector<T>& buf, int64_t n) {
  if (buf.size() < size_t(n)) buf.resize(size_t(n));
  return buf.data();
}
template <class T>
void trim(std::vector<T>& buf) {
  if (buf.capacity() * sizeof(T) > kKeepScratchBytes) std::vector<T>().swap(buf);
}

// A matrix: element (i, j) at p[i * rs + j * cs].
template <class T>
struct View {
  const T* p;
  int64_t rs, cs;
  View t() const { return {p, cs, rs}; }  // the transpose, same memory
};

// How sgemm reads a rows x cols matrix with these strides: row-major ('N') or transposed ('T').
bool sgemm_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, char& trans, int64_t& ld) {
  if (cs == 1 && (rows == 1 || rs >= std::max<int64_t>(cols, 1))) {
    trans = 'N';
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    return true;
  }
  if (rs == 1 && (cols == 1 || cs >= std::max<int64_t>(rows, 1))) {
    trans = 'T';
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    return true;
  }
  return false;
}

// C[m, n] (row-major, leading dim ldc) = alpha * (A[m, k] B[k, n]).
void gemm(int64_t m, int64_t n, int64_t k, float alpha, View<float> a, View<float> b, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    return;
  }
  char ta, tb;
  int64_t lda, ldb;
  if (!sgemm_layout(m, k, a.rs, a.cs, ta, lda) || !sgemm_layout(k, n, b.rs, b.cs, tb, ldb))
    throw std::runtime_error("[scaled_dot_product_attention] internal: operand strides fit no sgemm layout");
  dnnl_status_t st = dnnl_sgemm(ta, tb, m, n, k, alpha, a.p, lda, b.p, ldb, 0.0f, c, ldc);
  if (st != dnnl_success)
    throw std::runtime_error("[scaled_dot_product_attention] dnnl_sgemm failed with status " + std::to_string(int(st)));
}

// float64 (the gradchecks' precision): plain loops, the product rounded once and then scaled.
void gemm(int64_t m, int64_t n, int64_t k, double alpha, View<double> a, View<double> b, double* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    double* ci = c + i * ldc;
    std::fill_n(ci, n, 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double av = a.p[i * a.rs + p * a.cs];
      const double* bp = b.p + p * b.rs;
      for (int64_t j = 0; j < n; ++j) ci[j] += av * bp[j * b.cs];
    }
    if (alpha != 1.0 && k > 0)  // k == 0: zeros, whatever alpha (1/sqrt(0) is inf), as sgemm
      for (int64_t j = 0; j < n; ++j) ci[j] *= alpha;
  }
}

// One input seen as [batch..., rows, cols] over the broadcast batch shape.
struct Operand {
  const char* base = nullptr;
  Shape bstride;  // per batch dim, in elements (0 where broadcast)
  int64_t rs = 0, cs = 0;
  Tensor keep;  // the contiguous copy, when the input's strides fit no sgemm layout
};

// What a kernel needs of an input's last two dims: any strides, a layout sgemm reads, or rows
// with unit stride (read element by element along a row).
enum class Need { Strided, Gemm, Rows };

Operand operand(const Tensor& t, const Shape& batch, Need need) {
  Operand o;
  Tensor src = t;
  const int64_t r = t.dim(), rows = t.shape()[size_t(r - 2)], cols = t.shape()[size_t(r - 1)];
  const int64_t rs = t.strides()[size_t(r - 2)], cs = t.strides()[size_t(r - 1)];
  char tr;
  int64_t ld;
  const bool ok = need == Need::Strided || (sgemm_layout(rows, cols, rs, cs, tr, ld) && (need == Need::Gemm || tr == 'N'));
  if (!ok) src = o.keep = cpu::contiguous_raw(t);
  TensorImpl& impl = *src.impl();
  o.base = static_cast<const char*>(impl.data());
  o.rs = impl.strides[size_t(r - 2)];
  o.cs = impl.strides[size_t(r - 1)];
  o.bstride.assign(batch.size(), 0);
  const int64_t lead = int64_t(batch.size()) - (r - 2);
  for (int64_t d = 0; d < r - 2; ++d)
    if (impl.shape[size_t(d)] != 1) o.bstride[size_t(lead + d)] = impl.strides[size_t(d)];
  return o;
}

// A mask read element by element: its strides broadcast over [batch..., Sq, Sk].
Operand mask_operand(const Tensor& m, const Shape& batch, int64_t Sq, int64_t Sk) {
  Shape full = batch;
  full.push_back(Sq);
  full.push_back(Sk);
  const Shape st = cpu::broadcast_strides(*m.impl(), full);
  Operand o;
  o.base = static_cast<const char*>(m.impl()->data());
  o.bstride.assign(st.begin(), st.end() - 2);
  o.rs = st[batch.size()];
  o.cs = st[batch.size() + 1];
  return o;
}

// Element offset of batch entry `b` (row-major over `batch`) in an operand.
int64_t batch_offset(const Operand& o, const Shape& batch, int64_t b) {
  int64_t off = 0;
  for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
    off += (b % batch[size_t(d)]) * o.bstride[size_t(d)];
    b /= batch[size_t(d)];
  }
  return off;
}

template <class T>
View<T> view(const Operand& o, const Shape& batch, int64_t b, int64_t row0 = 0) {
  return {reinterpret_cast<const T*>(o.base) + batch_offset(o, batch, b) + row0 * o.rs, o.rs, o.cs};
}

// Row reductions in one 32-byte vector of lanes (GCC vector extensions: the loop vectorizer will
// not reorder a float max or sum by itself), lanes combined in a fixed order: the result is a
// fixed function of the row, whatever thread runs it.
template <class T>
struct Lanes {
  typedef T vec __attribute__((vector_size(32)));
  static constexpr int64_t n = 32 / sizeof(T);
  static vec load(const T* p) {
    vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static T sum(vec v) {
    T s[n];
    std::memcpy(s, &v, sizeof v);
    for (int64_t w = n / 2; w > 0; w /= 2)
      for (int64_t u = 0; u < w; ++u) s[u] += s[u + w];
    return s[0];
  }
};

// max(x[0, n)); NaNs are skipped (the exp pass turns them into a NaN row, as softmax does).
template <class T>
T row_max(const T* x, int64_t n) {
  using L = Lanes<T>;
  typename L::vec acc = typename L::vec{} - std::numeric_limits<T>::infinity();
  int64_t j = 0;
  for (; j + L::n <= n; j += L::n) {
    typename L::vec v = L::load(x + j);
    acc = acc < v ? v : acc;
  }
  T m = -std::numeric_limits<T>::infinity();
  if (j > 0)
    for (int64_t u = 0; u < L::n; ++u) m = std::max(m, T(acc[u]));
  for (; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

// sum(a[j] * b[j]) or, with b == nullptr, sum(a[j]).
template <class T>
T row_dot(const T* a, const T* b, int64_t n) {
  using L = Lanes<T>;
  typename L::vec acc{};
  int64_t j = 0;
  for (; j + L::n <= n; j += L::n) acc += b ? L::load(a + j) * L::load(b + j) : L::load(a + j);
  T s = L::sum(acc);
  for (; j < n; ++j) s += b ? a[j] * b[j] : a[j];
  return s;
}

// x[0, n) <- softmax(x[0, n)). Returns false, leaving x as it is, when every score is -inf (all
// keys masked): the caller makes that row NaN, as softmax of an all -inf row is (torch too).
template <class T>
bool softmax_row(T* x, int64_t n) {
  const T m = row_max(x, n);
  if (m == -std::numeric_limits<T>::infinity()) return false;
  for (int64_t j = 0; j < n; ++j) x[j] = cpu::any_exp(T(x[j] - m));  // a plain loop: vexp vectorizes
  const T inv = T(1) / row_dot<T>(x, nullptr, n);
  for (int64_t j = 0; j < n; ++j) x[j] *= inv;
  return true;
}

template <class T>
void forward(const KernelArgs& a) {
  const Tensor &q = a.in[0], &k = a.in[1], &v = a.in[2];
  const bool has_mask = a.in.size() == 4, causal = a.attrs.b("is_causal"), save = a.attrs.b("save_weights");
  const T scale = T(a.attrs.f("scale"));
  const Shape& os = a.out[0].shape();
  const Shape batch(os.begin(), os.end() - 2);
  const int64_t nb = numel_of(batch), Sq = os[os.size() - 2], Dv = os.back();
  const int64_t Sk = k.shape()[size_t(k.dim() - 2)], D = q.shape().back();
  if (nb * Sq == 0) return;
  const Operand oq = operand(q, batch, Need::Gemm), ok = operand(k, batch, Need::Gemm),
                ov = operand(v, batch, Need::Gemm);
  const Operand om = has_mask ? mask_operand(a.in[3], batch, Sq, Sk) : Operand{};
  const bool bool_mask = has_mask && a.in[3].dtype() == DType::Bool;
  T* po = a.out[0].impl()->template data_as<T>();
  T* pw = save ? a.out[1].impl()->template data_as<T>() : nullptr;

  const int64_t rb = std::clamp<int64_t>(kBlockScores / std::max<int64_t>(Sk, 1), 1, Sq);
  const int64_t nqb = (Sq + rb - 1) / rb, items = nb * nqb;
  const bool split = nb * Sq * Sk * (D + Dv) >= kSplitMacs;
  cpu::parallel_for(items, split ? 1 : items + 1, [&](int64_t s, int64_t e) {
    cpu::onednn::SerialOmp serial;
    thread_local std::vector<T> buf;
    for (int64_t it = s; it < e; ++it) {
      const int64_t b = it / nqb, i0 = (it % nqb) * rb, m = std::min(rb, Sq - i0);
      T* S = pw ? pw + (b * Sq + i0) * Sk : scratch(buf, m * Sk);
      // Causal: keys after the block's last query are masked for every row of the block.
      const int64_t nc = causal ? std::min(Sk, i0 + m) : Sk;
      gemm(m, nc, D, scale, view<T>(oq, batch, b, i0), view<T>(ok, batch, b).t(), S, Sk);
      const int64_t moff = has_mask ? batch_offset(om, batch, b) : 0;
      for (int64_t r = 0; r < m; ++r) {
        T* x = S + r * Sk;
        const int64_t len = causal ? std::min(Sk, i0 + r + 1) : Sk;
        if (has_mask) {
          const int64_t base = moff + (i0 + r) * om.rs;
          const int64_t cs = om.cs;  // 1 or 0 in practice: branch-free loops that vectorize
          if (bool_mask) {
            // Read as bytes: GCC vectorizes a select on uint8_t != 0, not on a bool load.
            const uint8_t* pm = reinterpret_cast<const uint8_t*>(om.base) + base;
            const T ninf = -std::numeric_limits<T>::infinity();
            if (cs == 1)
              for (int64_t j = 0; j < len; ++j) {
                const T v = x[j];
                x[j] = pm[j] != 0 ? ninf : v;
              }
            else
              for (int64_t j = 0; j < len; ++j) x[j] = pm[j * cs] != 0 ? ninf : x[j];
          } else {
            const T* pm = reinterpret_cast<const T*>(om.base) + base;
            if (cs == 1)
              for (int64_t j = 0; j < len; ++j) x[j] += pm[j];
            else
              for (int64_t j = 0; j < len; ++j) x[j] += pm[j * cs];
          }
        }
        // Weights past `len` (causally masked) are 0; a fully masked row is NaN throughout.
        if (softmax_row(x, len)) std::fill(x + len, x + Sk, T(0));
        else std::fill(x, x + Sk, std::numeric_limits<T>::quiet_NaN());
      }
      gemm(m, Dv, nc, T(1), View<T>{S, Sk, 1}, view<T>(ov, batch, b), po + (b * Sq + i0) * Dv, Dv);
    }
    trim(buf);
  });
}

template <class T>
void backward(const KernelArgs& a) {
  const bool scores_grad = a.attrs.b("scores_grad"), causal = a.attrs.b("is_causal"), has_mask = a.in.size() == 6;
  const T scale = T(a.attrs.f("scale"));
  const Shape& qs = a.out[0].shape();
  const Shape batch(qs.begin(), qs.end() - 2);
  const int64_t nb = numel_of(batch), Sq = qs[qs.size() - 2], D = qs.back();
  const int64_t Sk = a.out[1].shape()[batch.size()], Dv = a.out[2].shape().back();
  if (nb == 0) return;
  const Operand og = operand(a.in[0], batch, Need::Gemm), oq = operand(a.in[1], batch, Need::Gemm),
                ok = operand(a.in[2], batch, Need::Gemm), ov = operand(a.in[3], batch, Need::Gemm),
                ow = operand(a.in[4], batch, Need::Rows);
  const Operand om = has_mask ? mask_operand(a.in[5], batch, Sq, Sk) : Operand{};
  T* pdq = a.out[0].impl()->template data_as<T>();
  T* pdk = a.out[1].impl()->template data_as<T>();
  T* pdv = a.out[2].impl()->template data_as<T>();
  T* pds = scores_grad ? a.out[3].impl()->template data_as<T>() : nullptr;

  const bool split = nb > 1 && nb * Sq * Sk * (2 * D + 2 * Dv) >= kSplitMacs;
  cpu::parallel_for(nb, split ? 1 : nb + 1, [&](int64_t s, int64_t e) {
    cpu::onednn::SerialOmp serial;
    thread_local std::vector<T> buf;
    for (int64_t b = s; b < e; ++b) {
      T* dS = pds ? pds + b * Sq * Sk : scratch(buf, Sq * Sk);
      const View<T> P = view<T>(ow, batch, b), G = view<T>(og, batch, b);
      // dV = P^T dO; dP = dO V^T (in dS).
      gemm(Sk, Dv, Sq, T(1), P.t(), G, pdv + b * Sk * Dv, Dv);
      gemm(Sq, Sk, Dv, T(1), G, view<T>(ov, batch, b).t(), dS, Sk);
      // Through the softmax: dS = P * (dP - sum_j P dP), row by row; 0 where a key was masked
      // by the bool mask or causally (the gradient masked_fill would give, even in a NaN row).
      const int64_t moff = has_mask ? batch_offset(om, batch, b) : 0;
      for (int64_t i = 0; i < Sq; ++i) {
        const T* p = P.p + i * P.rs;
        T* d = dS + i * Sk;
        const int64_t len = causal ? std::min(Sk, i + 1) : Sk;
        const T dot = row_dot(p, static_cast<const T*>(d), len);
        for (int64_t j = 0; j < len; ++j) d[j] = p[j] * (d[j] - dot);
        std::fill(d + len, d + Sk, T(0));
        if (has_mask) {
          const uint8_t* pm = reinterpret_cast<const uint8_t*>(om.base) + moff + i * om.rs;
          for (int64_t j = 0; j < len; ++j) {
            const T x = d[j];
            d[j] = pm[j * om.cs] != 0 ? T(0) : x;
          }
        }
      }
      // The scores were scale * q k^T: dQ = scale dS K, dK = scale dS^T Q.
      gemm(Sq, D, Sk, scale, View<T>{dS, Sk, 1}, view<T>(ok, batch, b), pdq + b * Sq * D, D);
      gemm(Sk, D, Sq, scale, View<T>{dS, Sk, 1}.t(), view<T>(oq, batch, b), pdk + b * Sk * D, D);
    }
    trim(buf);
  });
}

}  // namespace

void scaled_dot_product_attention(const KernelArgs& k) {
  visit_floating(k.out[0].dtype(), [&](auto z) { forward<decltype(z)>(k); });
}

void scaled_dot_product_attention_backward(const KernelArgs& k) {
  visit_floating(k.out[0].dtype(), [&](auto z) { backward<decltype(z)>(k); });
}

}  // namespace terra::kernels
