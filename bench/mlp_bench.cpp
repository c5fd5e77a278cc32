// One training step of a 4-layer MLP (784-256-256-256-10, ReLU, cross-entropy, SGD momentum 0.9)
// in each terra Mode, plus the co-execution costs that the step hides or adds.
//
//   BM_MlpStep/mode/batch/fetch   mode 0 eager, 1 lazy, 2 coexec; fetch 1: loss.item() every step
//       (a normal training loop), fetch 0: no fetch inside steps. One benchmark iteration = kChunk
//       steps then Engine::synchronize(), so queued co-execution work is always counted. Each run
//       builds its own model + optimizer + Engine and warms up past tracing first (co-execution:
//       until a step adds no trace). Counters:
//         steps_per_s       steps per second (wall clock)
//         peak_tensor_B     terra::allocator_stats().peak_bytes_in_use during setup+warmup+timed steps,
//                           minus bytes in use before setup (params, grads, optimizer state, data,
//                           activations; co-execution also holds up to two queued steps' values)
//         rss_delta_B       process peak RSS (VmHWM, reset through /proc/self/clear_refs) minus RSS
//                           before setup, after empty_cache() + malloc_trim(0)
//         rss_peak_B        that VmHWM itself (whole process)
//         host_s_per_op     co-execution only: host busy time (Stats.host_busy_s, stalls excluded)
//                           per op call of the timed steps: the skeleton cost per op
//         timed_traces / timed_fallbacks   co-execution: Stats deltas over the timed steps (want 0)
//   BM_SkeletonTiny/mode   a tiny program (a chain of 1-element ops with grad, a manual SGD update):
//       the runner is nearly idle, so in co-execution the host's time per op is the skeleton cost.
//       Counters: s_per_op (wall time per op), host_s_per_op (host busy per op), runner_s_per_op.
//   BM_FirstSteps/mode/k   wall time of the k-th step (k = 1, 2, 3) of a fresh Engine at batch 64:
//       eager k=1 is the baseline; coexec k=1,2 are tracing steps (run eagerly + record, merge the
//       trace, generate the graph); lazy k=1 compiles its block.
//
// The op counts per step come from counting dispatcher calls (forward, backward, optimizer) in an
// eager step. Threads: OMP_NUM_THREADS (kernels on the host in eager/lazy, on the GraphRunner in
// co-execution). main() first checks that lazy and co-execution give eager's losses and records the
// result in the benchmark context ("check_*").
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <terra/core/dispatch.h>
#include <terra/terra.h>

#include "counting_exec.h"

using namespace terra;

namespace {

constexpr int64_t kIn = 784, kHidden = 256, kClasses = 10;
constexpr int kBatches = 8;  // distinct batches cycled through, like a small data loader
constexpr int kChunk = 10;   // steps per benchmark iteration

class Mlp : public nn::Module {
 public:
  Mlp() : fc1(kIn, kHidden), fc2(kHidden, kHidden), fc3(kHidden, kHidden), fc4(kHidden, kClasses) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
    register_module("fc4", fc4);
  }
  Tensor forward(const Tensor& x) override { return fc4(relu(fc3(relu(fc2(relu(fc1(x))))))); }
  std::string name() const override { return "Mlp"; }

 private:
  nn::Linear fc1, fc2, fc3, fc4;
};

__attribute__((noinline)) Tensor train_step(Mlp& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  Tensor loss = nn::functional::cross_entropy(model(x), y);
  opt.zero_grad();
  loss.backward();
  opt.step();
  return loss;
}

struct MlpSetup {
  explicit MlpSetup(Mode m, int64_t batch) : engine(m) {
    manual_seed(1);
    {
      NoGradGuard ng;
      for (int i = 0; i < kBatches; ++i) {
        xs.push_back(randn({batch, kIn}));
        ys.push_back(randint(0, kClasses, {batch}));
      }
    }
    manual_seed(0);
    model = std::make_unique<Mlp>();
    opt = std::make_unique<optim::SGD>(model->parameters(), 0.01, 0.9);
  }
  // One step in the engine; returns the loss if fetched.
  __attribute__((noinline)) float step(bool fetch) {
    const Tensor& x = xs[size_t(next % kBatches)];
    const Tensor& y = ys[size_t(next % kBatches)];
    next++;
    auto s = engine.step();
    Tensor loss = train_step(*model, *opt, x, y);
    return fetch ? loss.item<float>() : 0.0f;
  }

  Engine engine;
  std::vector<Tensor> xs, ys;
  std::unique_ptr<Mlp> model;
  std::unique_ptr<optim::SGD> opt;
  int64_t next = 0;
};

// Steps until co-execution stops tracing (a step that adds no trace, three times in a row).
void warm_up(MlpSetup& s, bool fetch) {
  int quiet = 0;
  for (int i = 0; i < 60 && quiet < 3; ++i) {
    int64_t t = s.engine.stats().traces;
    s.step(fetch);
    quiet = (i >= 4 && s.engine.stats().traces == t) ? quiet + 1 : 0;
  }
  s.engine.synchronize();
}

using bench::CountingExec;

// ------------------------------------------------------------------ process memory
int64_t proc_status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  size_t n = std::string(key).size();
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0) return std::stoll(line.substr(n + 1));
  return -1;
}
// Releases freed memory and resets VmHWM to the current RSS; returns the RSS in bytes.
int64_t reset_rss_peak() {
  empty_cache();
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
  return proc_status_kb("VmRSS:") * 1024;
}
int64_t rss_peak() { return proc_status_kb("VmHWM:") * 1024; }

// Benchmark argument -> Mode (the enum's own order is Eager, CoExecution, Lazy).
Mode mode_of(int64_t i) {
  static const Mode m[] = {Mode::Eager, Mode::Lazy, Mode::CoExecution};
  return m[i];
}

int64_t g_mlp_ops[2] = {0, 0};  // ops per MLP step at batch 16 / 64 (same program, same count)

int64_t count_mlp_ops(int64_t batch) {
  MlpSetup s(Mode::Eager, batch);
  s.step(true);
  CountingExec ce;
  {
    ExecutorScope scope(&ce);
    Tensor loss = train_step(*s.model, *s.opt, s.xs[0], s.ys[0]);
  }
  return ce.calls;
}

void BM_MlpStep(benchmark::State& state) {
  const Mode mode = mode_of(state.range(0));
  const int64_t batch = state.range(1);
  const bool fetch = state.range(2) != 0;
  state.SetLabel(std::string(mode_name(mode)) + (fetch ? " fetch-each-step" : " no-fetch"));
  int64_t rss0 = reset_rss_peak();
  int64_t in_use0 = allocator_stats().bytes_in_use;
  reset_peak_memory();
  double host_busy = 0, ops = 0;
  int64_t traces = 0, fallbacks = 0;
  try {
    MlpSetup s(mode, batch);
    warm_up(s, fetch);
    Stats st0 = s.engine.stats();
    for (auto _ : state) {
      for (int i = 0; i < kChunk; ++i) benchmark::DoNotOptimize(s.step(fetch));
      s.engine.synchronize();
    }
    Stats st1 = s.engine.stats();
    host_busy = st1.host_busy_s - st0.host_busy_s;
    traces = st1.traces - st0.traces;
    fallbacks = st1.fallbacks - st0.fallbacks;
    ops = double(state.iterations()) * kChunk * double(g_mlp_ops[batch == 16 ? 0 : 1]);
  } catch (const std::exception& ex) {
    state.SkipWithError(ex.what());
    return;
  }
  state.counters["steps_per_s"] = benchmark::Counter(kChunk, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_tensor_B"] = double(allocator_stats().peak_bytes_in_use - in_use0);
  state.counters["rss_peak_B"] = double(rss_peak());
  state.counters["rss_delta_B"] = double(rss_peak() - rss0);
  state.counters["ops_per_step"] = double(g_mlp_ops[batch == 16 ? 0 : 1]);
  if (mode == Mode::CoExecution) {
    state.counters["host_s_per_op"] = ops > 0 ? host_busy / ops : 0;
    state.counters["timed_traces"] = double(traces);
    state.counters["timed_fallbacks"] = double(fallbacks);
  }
}

// ------------------------------------------------------------------ skeleton cost (tiny program)
constexpr int kTinyPairs = 32;  // 64 forward ops

struct TinySetup {
  explicit TinySetup(Mode m) : engine(m) {
    w = tensor(std::vector<float>{0.5f}, {1});
    w.requires_grad_();
    c = tensor(std::vector<float>{0.999f}, {1});
  }
  __attribute__((noinline)) void body() {
    Tensor h = w;
    for (int i = 0; i < kTinyPairs; ++i) {
      h = h * c;
      h = h + c;
    }
    Tensor loss = h.sum();
    loss.backward();
    NoGradGuard ng;
    w.sub_(w.grad() * 1e-4);
    w.set_grad({});
  }
  __attribute__((noinline)) void step() {
    auto s = engine.step();
    body();
  }
  Engine engine;
  Tensor w, c;
};

int64_t g_tiny_ops = 0;

int64_t count_tiny_ops() {
  TinySetup s(Mode::Eager);
  CountingExec ce;
  ExecutorScope scope(&ce);
  s.body();
  return ce.calls;
}

void BM_SkeletonTiny(benchmark::State& state) {
  const Mode mode = mode_of(state.range(0));
  state.SetLabel(mode_name(mode));
  Stats st0, st1;
  try {
    TinySetup s(mode);
    int quiet = 0;
    for (int i = 0; i < 60 && quiet < 3; ++i) {
      int64_t t = s.engine.stats().traces;
      s.step();
      quiet = (i >= 4 && s.engine.stats().traces == t) ? quiet + 1 : 0;
    }
    s.engine.synchronize();
    st0 = s.engine.stats();
    for (auto _ : state) {
      for (int i = 0; i < kChunk; ++i) s.step();
      s.engine.synchronize();
    }
    st1 = s.engine.stats();
  } catch (const std::exception& ex) {
    state.SkipWithError(ex.what());
    return;
  }
  double ops = double(state.iterations()) * kChunk * double(g_tiny_ops);
  state.counters["ops_per_step"] = double(g_tiny_ops);
  state.counters["s_per_op"] = benchmark::Counter(double(kChunk * g_tiny_ops), benchmark::Counter::kIsIterationInvariantRate |
                                                                                  benchmark::Counter::kInvert);
  if (mode != Mode::Eager) state.counters["host_s_per_op"] = (st1.host_busy_s - st0.host_busy_s) / ops;
  if (mode == Mode::CoExecution) {
    state.counters["runner_s_per_op"] = (st1.runner_busy_s - st0.runner_busy_s) / ops;
    state.counters["timed_traces"] = double(st1.traces - st0.traces);
    state.counters["timed_fallbacks"] = double(st1.fallbacks - st0.fallbacks);
  }
}

// ------------------------------------------------------------------ tracing cost
void BM_FirstSteps(benchmark::State& state) {
  const Mode mode = mode_of(state.range(0));
  const int64_t k = state.range(1);
  state.SetLabel(std::string(mode_name(mode)) + " step " + std::to_string(k));
  int64_t traces = 0;
  for (auto _ : state) {
    try {
      MlpSetup s(mode, 64);
      for (int64_t i = 1; i < k; ++i) s.step(false);
      s.engine.synchronize();
      auto t0 = std::chrono::steady_clock::now();
      s.step(false);
      s.engine.synchronize();
      state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      traces = s.engine.stats().traces;
    } catch (const std::exception& ex) {
      state.SkipWithError(ex.what());
      break;
    }
  }
  state.counters["traces_so_far"] = double(traces);
}

// ------------------------------------------------------------------ correctness check
// Runs 12 steps in `m` and in eager from the same seeds and compares what the host sees: the losses
// fetched every step (fetch) or, without fetches, the parameters after the last step.
std::string check_mode(Mode m, int64_t batch, bool fetch) {
  auto observe = [&](Mode mm) {
    MlpSetup s(mm, batch);
    std::vector<float> v;
    for (int i = 0; i < 12; ++i) {
      float l = s.step(fetch);
      if (fetch) v.push_back(l);
    }
    s.engine.synchronize();
    if (!fetch)
      for (const Tensor& p : s.model->parameters())
        for (float x : p.to_vector<float>()) v.push_back(x);
    return v;
  };
  try {
    std::vector<float> e = observe(Mode::Eager), o = observe(m);
    if (e.size() != o.size()) return "MISMATCH (different number of values)";
    double maxdiff = 0;
    for (size_t i = 0; i < e.size(); ++i) maxdiff = std::max(maxdiff, double(std::fabs(e[i] - o[i])));
    std::ostringstream out;
    if (maxdiff == 0) out << "ok (bit-identical " << (fetch ? "losses" : "parameters") << ")";
    else out << "MISMATCH max |" << (fetch ? "loss" : "param") << " diff| = " << maxdiff;
    return out.str();
  } catch (const std::exception& ex) {
    return std::string("ERROR: ") + ex.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // Prime process-wide caches (oneDNN primitives, allocator size classes, OpenMP threads) so the
  // first benchmark's memory and time are not charged for them.
  g_mlp_ops[0] = count_mlp_ops(16);
  g_mlp_ops[1] = count_mlp_ops(64);
  g_tiny_ops = count_tiny_ops();
  for (int64_t b : {16, 64}) {
    for (bool fetch : {true, false}) {
      std::string sfx = "_b" + std::to_string(b) + (fetch ? "_fetch" : "_nofetch");
      benchmark::AddCustomContext("check_lazy" + sfx, check_mode(Mode::Lazy, b, fetch));
      benchmark::AddCustomContext("check_coexec" + sfx, check_mode(Mode::CoExecution, b, fetch));
    }
  }
  const char* threads = std::getenv("OMP_NUM_THREADS");
  benchmark::AddCustomContext("OMP_NUM_THREADS", threads ? threads : "(unset)");
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  benchmark::AddCustomContext("OMP_WAIT_POLICY", wait ? wait : "(unset)");

  for (int mode : {0, 1, 2})
    for (int64_t batch : {16, 64})
      for (int fetch : {1, 0})
        benchmark::RegisterBenchmark("BM_MlpStep", BM_MlpStep)
            ->Args({mode, batch, fetch})
            ->Iterations(batch == 16 ? 16 : 8)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
  for (int mode : {0, 1, 2})
    benchmark::RegisterBenchmark("BM_SkeletonTiny", BM_SkeletonTiny)
        ->Arg(mode)
        ->Iterations(20)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (auto [mode, k] : std::vector<std::pair<int, int>>{{0, 1}, {1, 1}, {2, 1}, {2, 2}, {2, 3}})
    benchmark::RegisterBenchmark("BM_FirstSteps", BM_FirstSteps)
        ->Args({mode, k})
        ->Iterations(5)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
