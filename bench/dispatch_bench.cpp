// Dispatch overhead in eager C++: what one op call costs when the kernel itself is trivial.
//
//   BM_Add1              c = a + b on 1-element float32 tensors, no autograd (target <= 1 us)
//   BM_Add1Grad          the same with a requiring grad (the call also records an autograd node)
//   BM_AddInplace1       a.add_(b): no output allocation
//   BM_FwdBwdChain/N     N ops (alternating add and mul on 1-element tensors) from a leaf that
//                        requires grad, then backward(); counter s_per_op = time / N, i.e. the
//                        forward + backward cost per op (PyTorch 1.13 from Python: 6-11 us)
//
// Everything runs on the calling thread; OMP_NUM_THREADS does not matter for 1-element kernels.
#include <benchmark/benchmark.h>

#include <terra/terra.h>

using namespace terra;

namespace {

void BM_Add1(benchmark::State& state) {
  Tensor a = tensor(std::vector<float>{1.0f}, {1});
  Tensor b = tensor(std::vector<float>{2.0f}, {1});
  for (auto _ : state) {
    Tensor c = a + b;
    benchmark::DoNotOptimize(c.impl());
  }
  state.counters["s_per_op"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}
BENCHMARK(BM_Add1);

void BM_Add1Grad(benchmark::State& state) {
  Tensor a = tensor(std::vector<float>{1.0f}, {1});
  a.requires_grad_();
  Tensor b = tensor(std::vector<float>{2.0f}, {1});
  for (auto _ : state) {
    Tensor c = a + b;
    benchmark::DoNotOptimize(c.impl());
  }
  state.counters["s_per_op"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}
BENCHMARK(BM_Add1Grad);

void BM_AddInplace1(benchmark::State& state) {
  Tensor a = tensor(std::vector<float>{1.0f}, {1});
  Tensor b = tensor(std::vector<float>{0.0f}, {1});
  for (auto _ : state) {
    a.add_(b);
    benchmark::DoNotOptimize(a.impl());
  }
  state.counters["s_per_op"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}
BENCHMARK(BM_AddInplace1);

void BM_FwdBwdChain(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor x = tensor(std::vector<float>{0.5f}, {1});
  x.requires_grad_();
  Tensor c = tensor(std::vector<float>{1.0001f}, {1});
  for (auto _ : state) {
    Tensor h = x;
    for (int64_t i = 0; i < n; ++i) h = (i % 2) ? h * c : h + c;
    h.backward();
    x.set_grad({});
  }
  // n forward ops; backward adds about one op per forward op.
  state.counters["s_per_op"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate |
                                                                  benchmark::Counter::kInvert);
}
BENCHMARK(BM_FwdBwdChain)->Arg(64);

}  // namespace

BENCHMARK_MAIN();
