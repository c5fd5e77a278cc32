// The elementwise-fusion kernel against the same ops unfused and against the memory bandwidth.
//
//   BM_Stream/n         out[i] = x[i] + y[i] in a plain loop (2 reads, 1 write): one streaming pass
//   BM_ChainUnfused/n   an 8-op chain over x, y (scalars between) as eager runs it: 8 kernels,
//                       7 intermediates allocated and written out
//   BM_ChainFused/n     the same chain as one compile::FusedKernel: generated code, values in registers
//                       (TERRA_PASSES_OFF=jit_elementwise: the tile interpreter, intermediates in L1 tiles)
//   BM_JitAssemble      the time to generate the chain's code (each iteration a new cache key)
//   BM_AdamUnfused/n    one Adam update of n parameters as eager runs it: exp_avg_, exp_avg_sq_,
//                       adam_param_ (three passes: 10 streams of n floats)
//   BM_AdamOnePass/n    fused_adam_ (what optim::Adam runs): the three updates in one pass per element
//   BM_AdamPerParamOps/k, BM_AdamOneOp/k  k parameters of 4096: ~5 ops per parameter vs one op
//   BM_AdamFused/n      the same three ops as one FusedKernel (p, g, m, v read once, p, m, v written
//                       once: 7 streams, the GB/s counted for both). Measured 2026-11-23 (8 interleaved
//                       repetitions): 7 % faster at 64K parameters, 18 % slower at 10M, so the graph
//                       modes do not fuse optimizer updates; unfused Adam already runs above one
//                       thread's streaming bandwidth (BM_Stream) at 10M.
//
// The chain reads x and y and writes one output, the same bytes as BM_Stream: the fused/stream
// ratio is how close fusion gets to the bandwidth. Wall-clock time, terra's default thread count.
#include <benchmark/benchmark.h>

#include <vector>

#include <terra/terra.h>

#include "terra/backend/cpu/jit_elementwise.h"
#include "terra/compile/fused_elementwise.h"
#include "terra/ops/optim_ops.h"

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

// The chain's code, assembled from nothing: iteration i adds i unused slots, so every key is new.
void BM_JitAssemble(benchmark::State& state) {
  compile::FusedKernel k = chain_kernel(1024);
  std::vector<cpu::JitOp> ops;
  for (const compile::FusedOp& o : k.ops) ops.push_back({o.op, {o.in[0], o.in[1]}, 2, o.out});
  std::vector<cpu::JitSlot> slots(k.slot_dtype.size(), cpu::JitSlot::Scratch);
  slots[0] = slots[1] = slots.back() = cpu::JitSlot::Full;
  slots[2] = slots[3] = cpu::JitSlot::Scalar;
  for (auto _ : state) {
    slots.push_back(cpu::JitSlot::Full);
    auto code = cpu::jit_elementwise(ops, slots);
    if (!code) state.SkipWithError("no code (no AVX2?)");
    benchmark::DoNotOptimize(code.get());
  }
}
BENCHMARK(BM_JitAssemble)->Iterations(200)->Unit(benchmark::kMicrosecond);

struct AdamState {
  Tensor p, g, m, v, lr;
  std::vector<Tensor> sc;
  explicit AdamState(int64_t n) {
    manual_seed(0);
    p = randn({n}), g = randn({n}), m = randn({n}) * 0.1, v = rand({n});
    lr = scalar_tensor(1e-3, DType::Float64);
    sc = adam_step_scalars(scalar_tensor(3.0, DType::Float64), lr, 0.9, 0.999, DType::Float32);
  }
  void unfused() {
    adam_exp_avg_(m, g, 0.9);
    adam_exp_avg_sq_(v, g, 0.999);
    adam_param_(p, m, v, sc, 1e-8, lr, 0.0);
  }
};

const double kAdamBytes = 7.0 * 4.0;  // per parameter: p, g, m, v read, p, m, v written

void BM_AdamUnfused(benchmark::State& state) {
  AdamState s(state.range(0));
  for (auto _ : state) {
    s.unfused();
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(kAdamBytes * double(state.range(0)), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AdamUnfused)->Arg(1 << 16)->Arg(10 << 20)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_AdamFused(benchmark::State& state) {
  const int64_t n = state.range(0);
  AdamState s(n), ref(n);
  static const Attrs a1{{"beta1", 0.9}, {"weight_decay", 0.0}, {"has_param", false}};
  static const Attrs a2{{"beta2", 0.999}, {"weight_decay", 0.0}, {"has_param", false}};
  static const Attrs a3{{"eps", 1e-8}, {"weight_decay", 0.0}};
  // Slots as the runner plans them: 0 m, 1 g, 2 v, 3 g, 4 p, 5 sc0, 6 sc1, 7 lr.
  compile::FusedKernel k;
  k.numel = n;
  k.slot_dtype = {DType::Float32, DType::Float32, DType::Float32, DType::Float32, DType::Float32,
                  DType::Float32, DType::Float32, DType::Float64};
  k.ops = {{find_op("adam_exp_avg_"), &a1, {0, 1}, 0},
           {find_op("adam_exp_avg_sq_"), &a2, {2, 3}, 2},
           {find_op("adam_param_"), &a3, {4, 0, 2, 5, 6, 7}, 4}};
  std::vector<Tensor> slots{s.m, s.g, s.v, s.g, s.p, s.sc[0], s.sc[1], s.lr};
  compile::run_fused(k, slots);  // same bits as the unfused ops (checked once, outside the timing)
  ref.unfused();
  if (s.p.to_vector<float>() != ref.p.to_vector<float>() || s.m.to_vector<float>() != ref.m.to_vector<float>() ||
      s.v.to_vector<float>() != ref.v.to_vector<float>())
    state.SkipWithError("fused Adam differs from the unfused ops");
  for (auto _ : state) {
    compile::run_fused(k, slots);
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(kAdamBytes * double(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AdamFused)->Arg(1 << 16)->Arg(10 << 20)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The optimizers' own one-op update (fused_adam_): one parameter of n elements in its single pass.
void BM_AdamOnePass(benchmark::State& state) {
  const int64_t n = state.range(0);
  AdamState s(n);
  Tensor t = scalar_tensor(0.0, DType::Float64);
  for (auto _ : state) {
    fused_adam_({s.p}, {s.g}, {s.m}, {s.v}, {t}, s.lr, 0.9, 0.999, 1e-8, 0.0, false);
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(kAdamBytes * double(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AdamOnePass)->Arg(1 << 16)->Arg(10 << 20)->UseRealTime()->Unit(benchmark::kMicrosecond);

// A model's worth of small parameters (range(0) of 4096 floats, the Python loop's LayerNorm/Linear
// sizes): Adam as per-parameter ops (count, exp_avg_, exp_avg_sq_, scalars, param_: 5 dispatches
// each) against one fused_adam_ call. The difference is dispatch, not bandwidth.
struct ManyParams {
  std::vector<Tensor> p, g, m, v, t;
  Tensor lr = scalar_tensor(1e-3, DType::Float64);
  explicit ManyParams(int64_t k) {
    manual_seed(0);
    for (int64_t i = 0; i < k; ++i) {
      p.push_back(randn({4096}));
      g.push_back(randn({4096}));
      m.push_back(randn({4096}) * 0.1);
      v.push_back(rand({4096}));
      t.push_back(scalar_tensor(0.0, DType::Float64));
    }
  }
};

void BM_AdamPerParamOps(benchmark::State& state) {
  ManyParams s(state.range(0));
  for (auto _ : state) {
    for (size_t i = 0; i < s.p.size(); ++i) {
      s.t[i].add_(1.0);
      adam_exp_avg_(s.m[i], s.g[i], 0.9);
      adam_exp_avg_sq_(s.v[i], s.g[i], 0.999);
      adam_param_(s.p[i], s.m[i], s.v[i], adam_step_scalars(s.t[i], s.lr, 0.9, 0.999, DType::Float32), 1e-8, s.lr);
    }
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(kAdamBytes * 4096.0 * double(state.range(0)),
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AdamPerParamOps)->Arg(26)->Arg(200)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_AdamOneOp(benchmark::State& state) {
  ManyParams s(state.range(0));
  for (auto _ : state) {
    fused_adam_(s.p, s.g, s.m, s.v, s.t, s.lr, 0.9, 0.999, 1e-8, 0.0, false);
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(kAdamBytes * 4096.0 * double(state.range(0)),
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AdamOneOp)->Arg(26)->Arg(200)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
