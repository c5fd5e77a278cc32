// Fused attention against the same attention composed from ops (what nn::functional ran before
// the fused op; it still runs with active dropout), float32, eager, with a bool causal mask.
//
//   BM_AttentionComposed/i/train   matmul(q * scale, k^T), masked_fill, softmax, matmul + backward
//   BM_AttentionFused/i/train      terra::scaled_dot_product_attention + backward
//   .../infer (second arg 0)       forward only, no grad
//
// Shapes i (kShapes): the transformer programs' (batch, heads, seq, head dim) and a larger one.
// Threads: terra::num_threads() (OMP_NUM_THREADS or the CPUs).
#include <benchmark/benchmark.h>

#include <cmath>
#include <optional>
#include <string>

#include <terra/terra.h>

using namespace terra;

namespace {

struct Shape4 {
  const char* name;
  int64_t b, h, s, d;
};
const Shape4 kShapes[] = {
    {"bert_qa", 8, 2, 48, 32}, {"bert_cls", 16, 2, 32, 32}, {"gpt2/music", 8, 4, 64, 16}, {"large", 4, 8, 256, 64}};

Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  Tensor s = matmul(q * (1.0 / std::sqrt(double(q.shape().back()))), k.transpose(-2, -1));
  return matmul(softmax(masked_fill(s, mask, -INFINITY), -1), v);
}

template <bool kFused>
void BM_Attention(benchmark::State& state) {
  const Shape4& sh = kShapes[state.range(0)];
  const bool train = state.range(1) != 0;
  manual_seed(0);
  Tensor q = randn({sh.b, sh.h, sh.s, sh.d}), k = randn({sh.b, sh.h, sh.s, sh.d}), v = randn({sh.b, sh.h, sh.s, sh.d});
  Tensor idx = arange(sh.s), mask = gt(idx.unsqueeze(0), idx.unsqueeze(1));
  if (train)
    for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
  Tensor g = randn({sh.b, sh.h, sh.s, sh.d});
  for (auto _ : state) {
    std::optional<NoGradGuard> ng;
    if (!train) ng.emplace();
    Tensor o = kFused ? scaled_dot_product_attention(q, k, v, mask) : composed(q, k, v, mask);
    if (train) {
      (o * g).sum().backward();
      for (Tensor* t : {&q, &k, &v}) t->set_grad({});
    }
    benchmark::DoNotOptimize(o.impl());
  }
  state.SetLabel(std::string(sh.name) + (train ? " fwd+bwd" : " fwd"));
}

void args(benchmark::internal::Benchmark* b) {
  for (int64_t i = 0; i < int64_t(std::size(kShapes)); ++i)
    for (int64_t t : {0, 1}) b->Args({i, t});
}
BENCHMARK(BM_Attention<false>)->Name("BM_AttentionComposed")->Apply(args)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Attention<true>)->Name("BM_AttentionFused")->Apply(args)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
