// The elementwise-fusion kernel against the same ops unfused and against the memory bandwidth.
//
//   BM_Stream/n         out[i] = x[i] + y[i] in a plain loop (2 reads, 1 write): one streaming pass
//   BM_ChainUnfused/n   an 8-op chain over x, y (scalars between) as eager runs it: 8 kernels,
//                       7 intermediates allocated and written out
//   BM_ChainFused/n     the same chain as one compile::FusedKernel (intermediates stay in tiles)
//
// The chain reads x and y and writes one output, the same bytes as BM_Stream: the fused/stream
// ratio is how close fusion gets to the bandwidth. Wall-clock time, terra's default thread count.
#include <benchmark/benchmark.h>

#include <vector>

#include <terra/terra.h>

#include "terra/compile/fused_elementwise.h"

using namespace terra;

namespace {

Tensor chain_unfused(const Tensor& x, const Tensor& y, const Tensor& s1, const Tensor& s2) {
  Tensor t = add(mul(x, s1), y);
  t = sub(mul(t, t), x);
  t = add(div(t, s2), y);
  return sub(mul(t, s1), t);
}

// Slots: 0 x, 1 y, 2 s1, 3 s2, then one per op output.
compile::FusedKernel chain_kernel(int64_t n) {
  static const Attrs none;
  compile::FusedKernel k;
  k.numel = n;
  k.slot_dtype.assign(4, DType::Float32);
  auto op = [&](const char* name, uint32_t a, uint32_t b) {
    uint32_t out = uint32_t(k.slot_dtype.size());
    k.slot_dtype.push_back(DType::Float32);
    k.ops.push_back({find_op(name), &none, {a, b}, out});
    return out;
  };
  uint32_t t = op("add", op("mul", 0, 2), 1);
  uint32_t sq = op("mul", t, t);
  t = op("sub", sq, 0);
  t = op("add", op("div", t, 3), 1);
  op("sub", op("mul", t, 2), t);
  return k;
}

void BM_Stream(benchmark::State& state) {
  const int64_t n = state.range(0);
  manual_seed(0);
  Tensor x = randn({n}), y = randn({n});
  std::vector<float> out(static_cast<size_t>(n));
  const float* px = x.data_ptr<float>();
  const float* py = y.data_ptr<float>();
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = px[i] + py[i];
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(12.0 * double(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Stream)->Arg(1 << 16)->Arg(1 << 22)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ChainUnfused(benchmark::State& state) {
  const int64_t n = state.range(0);
  manual_seed(0);
  Tensor x = randn({n}), y = randn({n}), s1 = scalar_tensor(0.5), s2 = scalar_tensor(3.0);
  for (auto _ : state) {
    Tensor r = chain_unfused(x, y, s1, s2);
    benchmark::DoNotOptimize(r.impl());
  }
  state.counters["GB/s"] = benchmark::Counter(12.0 * double(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ChainUnfused)->Arg(1 << 16)->Arg(1 << 22)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ChainFused(benchmark::State& state) {
  const int64_t n = state.range(0);
  manual_seed(0);
  Tensor x = randn({n}), y = randn({n}), s1 = scalar_tensor(0.5), s2 = scalar_tensor(3.0);
  compile::FusedKernel k = chain_kernel(n);
  std::vector<Tensor> slots(k.slot_dtype.size());
  slots[0] = x, slots[1] = y, slots[2] = s1, slots[3] = s2;
  // Same bits as the unfused chain (checked once, outside the timing).
  slots.back() = empty({n});
  compile::run_fused(k, slots);
  if (chain_unfused(x, y, s1, s2).to_vector<float>() != slots.back().to_vector<float>())
    state.SkipWithError("fused result differs from the unfused chain");
  for (auto _ : state) {  // into the same output each time, as BM_Stream (a planned arena would)
    compile::run_fused(k, slots);
    benchmark::DoNotOptimize(slots.back().impl());
  }
  state.counters["GB/s"] = benchmark::Counter(12.0 * double(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ChainFused)->Arg(1 << 16)->Arg(1 << 22)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
