// The sum loops reduce and softmax share. sum_columns sums over a block of dims that is not
// innermost (a bias gradient's sum over the batch, a mean over time) without first copying the
// reduced dims innermost: each output still adds its elements in increasing reduced index in the
// accumulator type, exactly as reduce_rows' row loop does, so the bits are the same; the loop runs
// across the kept inner elements, which vectorizes. sum_row sums one contiguous row in fixed lanes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "terra/backend/cpu/parallel.h"
#include "terra/core/tensor.h"

namespace terra::cpu {

// out[o, k] = sum over r of x[o, r, k] (x viewed as [O, R, K]), when x is contiguous and `dims`
// (sorted) is one run [d0, d1) with d1 < rank and K > 1. Returns false, computing nothing, otherwise.
template <class T, class Acc, class Out>
bool sum_columns(TensorImpl& x, const std::vector<int64_t>& dims, Out* out) {
  const int64_t rank = int64_t(x.shape.size());
  if (dims.empty() || !x.is_contiguous()) return false;
  const int64_t d0 = dims.front(), d1 = dims.back() + 1;
  if (d1 - d0 != int64_t(dims.size()) || d1 >= rank) return false;
  int64_t O = 1, R = 1, K = 1;
  for (int64_t d = 0; d < d0; ++d) O *= x.shape[size_t(d)];
  for (int64_t d = d0; d < d1; ++d) R *= x.shape[size_t(d)];
  for (int64_t d = d1; d < rank; ++d) K *= x.shape[size_t(d)];
  if (K < 2) return false;
  const T* src = x.data_as<T>();
  // Columns in blocks of kCols: the accumulators stay in L1 while the block's rows stream past.
  constexpr int64_t kCols = 512;
  const int64_t blocks = (K + kCols - 1) / kCols;
  parallel_for(O * blocks, std::max<int64_t>(1, kGrain / std::max<int64_t>(R * std::min(K, kCols), 1)),
               [&](int64_t b, int64_t e) {
                 Acc acc[kCols];
                 for (int64_t ob = b; ob < e; ++ob) {
                   const int64_t o = ob / blocks, k0 = (ob % blocks) * kCols, n = std::min(kCols, K - k0);
                   const T* base = src + o * R * K + k0;
                   for (int64_t k = 0; k < n; ++k) acc[k] = Acc(0);
                   for (int64_t r = 0; r < R; ++r) {
                     const T* row = base + r * K;
                     for (int64_t k = 0; k < n; ++k) acc[k] += Acc(row[k]);
                   }
                   Out* dst = out + o * K + k0;
                   for (int64_t k = 0; k < n; ++k) dst[k] = Out(acc[k]);
                 }
               });
  return true;
}

// The sum of row[0..n) in Acc: eight interleaved partial sums (lane l adds elements l, l + 8, ...),
// combined in a fixed tree, then the tail in order. A fixed function of the row, so every mode and
// thread count gets the same bits; the lanes vectorize, where one running sum waits on each add.
template <class Acc, class T>
Acc sum_row(const T* row, int64_t n) {
  Acc s[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) s[l] += Acc(row[j + l]);
  Acc t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; j < n; ++j) t += Acc(row[j]);
  return t;
}

}  // namespace terra::cpu
