// Batched matmul on oneDNN's sgemm (float32) and a blocked loop (float64, int64), optionally with
// a per-column bias added to each output block right after its GEMM (linear: one pass, not two).
#include <oneapi/dnnl/dnnl.h>

#include <stdexcept>
#include <string>

#include "terra/backend/cpu/dnnl_common.h"
#include "terra/backend/cpu/loops.h"
#include "terra/backend/matmul_kernels.h"
#include "terra/core/object_pool.h"

namespace terra::kernels {
namespace {

// Multiply-adds below which an sgemm stays whole on the calling thread. Measured on 2 cores
// (1 vs 2 threads, the blocks' oneDNN calls plus a worker's wake-up): 16x256x256 (1M) ran 1.14x
// slower split, 64x256x256 (4M) 0.5-0.86x; 2^17 split products too small to pay for it.
constexpr int64_t kSplitMacs = int64_t(1) << 21;

// A matrix operand as sgemm wants it: row-major with a leading dim, or transposed.
struct Mat {
  const void* base;
  bool trans;
  int64_t ld;
};

// Describes the last two dims of `t` (strides rs, cs) as an sgemm operand, if they fit one.
bool as_gemm_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool& trans, int64_t& ld) {
  if (cs == 1 && (rows == 1 || rs >= std::max<int64_t>(cols, 1))) {
    trans = false;
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    return true;
  }
  if (rs == 1 && (cols == 1 || cs >= std::max<int64_t>(rows, 1))) {
    trans = true;
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    return true;
  }
  return false;
}

template <class T>
void gemm_loop(int64_t M, int64_t N, int64_t K, const T* A, int64_t ars, int64_t acs, const T* B, int64_t brs,
               int64_t bcs, T* C) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * N;
    for (int64_t j = 0; j < N; ++j) c[j] = T(0);
    for (int64_t p = 0; p < K; ++p) {
      T av = A[i * ars + p * acs];
      const T* b = B + p * brs;
      for (int64_t j = 0; j < N; ++j) c[j] += av * b[j * bcs];
    }
  }
}

// What follows the GEMM on each output block: a per-column bias, then optionally relu.
struct Epilogue {
  const void* bias = nullptr;  // [n] in the output's dtype; null: plain matmul
  bool relu = false;
};

// c[i][j] += bias[j] (then relu) over an m x n block (row stride ldc) while it is in cache: the
// same float addition, rounded once, and the same `v < 0 ? 0 : v` that separate add and relu
// kernels would apply to the finished product.
template <class T>
void epilogue(T* c, int64_t m, int64_t n, int64_t ldc, const T* bias, bool relu) {
  for (int64_t i = 0; i < m; ++i) {
    T* row = c + i * ldc;
    if (relu) {
      for (int64_t j = 0; j < n; ++j) {
        T v = static_cast<T>(row[j] + bias[j]);
        row[j] = v < T(0) ? T(0) : v;
      }
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] = static_cast<T>(row[j] + bias[j]);
    }
  }
}

// out[..., m, n] = a[..., m, k] @ b[..., k, n], then the epilogue (in out's dtype).
void matmul_into(const Tensor& ta, const Tensor& tb, TensorImpl& C, const Epilogue& ep) {
  const void* bias = ep.bias;
  TensorImpl& A = *ta.impl();
  TensorImpl& B = *tb.impl();
  const int64_t ra = int64_t(A.shape.size()), rb = int64_t(B.shape.size()), rc = int64_t(C.shape.size());
  const int64_t M = C.shape[size_t(rc - 2)], N = C.shape[size_t(rc - 1)], K = A.shape[size_t(ra - 1)];
  // Batch iteration: broadcast strides of A and B over C's batch dims.
  Shape batch(C.shape.begin(), C.shape.end() - 2);
  int64_t nb = numel_of(batch);
  Shape sa(batch.size(), 0), sb(batch.size(), 0);
  for (size_t d = 0; d < batch.size(); ++d) {
    int64_t da = int64_t(d) - (int64_t(batch.size()) - (ra - 2));
    int64_t db = int64_t(d) - (int64_t(batch.size()) - (rb - 2));
    if (da >= 0 && A.shape[size_t(da)] != 1) sa[d] = A.strides[size_t(da)];
    if (db >= 0 && B.shape[size_t(db)] != 1) sb[d] = B.strides[size_t(db)];
  }
  const int64_t ars = A.strides[size_t(ra - 2)], acs = A.strides[size_t(ra - 1)];
  const int64_t brs = B.strides[size_t(rb - 2)], bcs = B.strides[size_t(rb - 1)];
  size_t es = itemsize(C.dtype);
  char* pa = static_cast<char*>(A.data());
  char* pb = static_cast<char*>(B.data());
  char* pc = static_cast<char*>(C.data());
  if (M * N == 0) return;

  auto batch_offsets = [&](int64_t i, int64_t& oa, int64_t& ob) {
    oa = ob = 0;
    for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
      int64_t idx = i % batch[size_t(d)];
      i /= batch[size_t(d)];
      oa += idx * sa[size_t(d)];
      ob += idx * sb[size_t(d)];
    }
  };

  if (C.dtype == DType::Float32) {
    bool trans_a, trans_b;
    int64_t lda, ldb;
    Tensor ca, cb;  // contiguous copies when an operand's strides fit no sgemm layout
    // An operand whose last two dims fit no sgemm layout is copied to contiguous memory; its
    // batch strides change with it.
    auto densify = [&](const Tensor& t, int64_t rank, Shape& sbatch, char*& p, bool& trans, int64_t& ld, int64_t cols) {
      Tensor c = cpu::contiguous_raw(t);
      p = static_cast<char*>(c.impl()->data());
      Shape cs = contiguous_strides(t.shape());
      for (size_t d = 0; d < batch.size(); ++d) {
        int64_t dt = int64_t(d) - (int64_t(batch.size()) - (rank - 2));
        sbatch[d] = dt >= 0 && t.shape()[size_t(dt)] != 1 ? cs[size_t(dt)] : 0;
      }
      trans = false;
      ld = cols;
      return c;
    };
    if (!as_gemm_operand(M, K, ars, acs, trans_a, lda)) ca = densify(ta, ra, sa, pa, trans_a, lda, K);
    if (!as_gemm_operand(K, N, brs, bcs, trans_b, ldb)) cb = densify(tb, rb, sb, pb, trans_b, ldb, N);
    // Work items: (batch entry, block of C). Blocks split the larger of M and N into one per
    // thread, so each item is an independent single-threaded sgemm; the blocks depend only on the
    // shapes and num_threads(), so every mode and thread computes the same bits.
    const int threads = num_threads();
    const bool split = threads > 1 && nb < threads && K > 0 && M * N * K >= kSplitMacs;
    const bool by_rows = M >= N;
    const int64_t dim = by_rows ? M : N;
    int64_t block = split ? (dim + threads - 1) / threads : dim;
    if (split) block = (block + 15) / 16 * 16;  // whole vectors per block
    const int64_t nblk = (dim + block - 1) / block;
    auto item = [&](int64_t it) {
      int64_t i = it / nblk, b0 = (it % nblk) * block, len = std::min(dim, b0 + block) - b0;
      int64_t oa, ob;
      batch_offsets(i, oa, ob);
      float* c = reinterpret_cast<float*>(pc) + i * M * N;
      const float* fb = static_cast<const float*>(bias);
      if (K == 0) {
        std::fill_n(c, M * N, 0.0f);
        if (fb) epilogue(c, M, N, N, fb, ep.relu);
        return;
      }
      const float* a = reinterpret_cast<const float*>(pa) + oa;
      const float* bm = reinterpret_cast<const float*>(pb) + ob;
      int64_t m = M, n = N;
      if (by_rows) {
        a += trans_a ? b0 : b0 * lda;  // rows b0.. of op(A)
        c += b0 * N;
        m = len;
      } else {
        bm += trans_b ? b0 * ldb : b0;  // columns b0.. of op(B)
        c += b0;
        if (fb) fb += b0;
        n = len;
      }
      dnnl_status_t st =
          dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, K, 1.0f, a, lda, bm, ldb, 0.0f, c, N);
      if (st != dnnl_success) throw std::runtime_error("[matmul] dnnl_sgemm failed with status " + std::to_string(int(st)));
      if (fb) epilogue(c, m, n, N, fb, ep.relu);
    };
    const int64_t items = nb * nblk;
    const bool parallel = split || (threads > 1 && nb > 1 && M * N * K * nb >= kSplitMacs);
    cpu::parallel_for(items, parallel ? 1 : items + 1, [&](int64_t s, int64_t e) {
      cpu::onednn::SerialOmp serial;
      for (int64_t it = s; it < e; ++it) item(it);
    });
    return;
  }
  visit_dtype(C.dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_same_v<T, bool>) {
      throw std::invalid_argument("[matmul] bool tensors are not supported");
    } else {
      cpu::parallel_for(nb * M, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(N * K, 1)),
                        [&](int64_t b, int64_t e) {
                          for (int64_t r = b; r < e; ++r) {
                            int64_t i = r / M, row = r % M, oa, ob;
                            batch_offsets(i, oa, ob);
                            T* c = reinterpret_cast<T*>(pc) + i * M * N + row * N;
                            gemm_loop<T>(1, N, K, reinterpret_cast<const T*>(pa) + oa + row * ars, ars, acs,
                                         reinterpret_cast<const T*>(pb) + ob, brs, bcs, c);
                            if (bias) epilogue(c, 1, N, N, static_cast<const T*>(bias), ep.relu);
                          }
                        });
    }
  });
  (void)es;
}

}  // namespace

void matmul(const KernelArgs& k) { matmul_into(k.in[0], k.in[1], *k.out[0].impl(), {}); }

void linear(const KernelArgs& k, bool relu) {
  // w^T as a strided view of w: the operand matmul(x, w.t()) was given, so the same sgemm calls.
  const TensorImpl& w = *k.in[1].impl();
  auto wt = make_pooled<TensorImpl>();
  wt->shape = {w.shape[1], w.shape[0]};
  wt->strides = {w.strides[1], w.strides[0]};
  wt->offset = w.offset;
  wt->numel = w.numel;
  wt->dtype = w.dtype;
  wt->storage = w.storage;
  Tensor b = cpu::contiguous_raw(k.in[2]);
  matmul_into(k.in[0], Tensor(wt), *k.out[0].impl(), {.bias = b.impl()->data(), .relu = relu});
}

}  // namespace terra::kernels
