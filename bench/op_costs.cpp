// Per-op costs of each mode on 1-element tensors, where kernels cost nothing and only the runtime
// shows: eager dispatch (wall time per op), co-execution's skeleton (host busy time per op, the
// runner's waits excluded) and GraphRunner (runner busy time per op), lazy's record + barrier.
// Modes run in one process, interleaved round by round. No environment variable is read.
//
//   op_costs [--ops N] [--steps S] [--rounds R] [--program NAME] [--mode MODE] [--ops-per-step]
// --ops-per-step prints the op calls one step of the program makes and exits (for
// bench/instructions_per_op.py, which divides callgrind's counts by them).
// Programs: "add" (c = c + b, no autograd), "add_grad" (the same chain from a leaf that requires
// grad, then backward: forward and backward ops counted), "linear" (relu(Linear 8->8) chain, no grad).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <terra/core/dispatch.h>
#include <terra/terra.h>

#include "counting_exec.h"

using namespace terra;

namespace {

using bench::CountingExec;

struct Program {
  const char* name;
  std::function<void()> setup;
  std::function<void()> body;  // one step's ops (the engine's step is opened by the caller)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n_ops = 200, steps = 200, rounds = 5;
  std::string only, only_mode;
  bool ops_only = false;
  for (int i = 1; i < argc; ++i) {
    auto num = [&](int64_t& v) { v = i + 1 < argc ? std::atoll(argv[++i]) : v; };
    if (!std::strcmp(argv[i], "--ops")) num(n_ops);
    else if (!std::strcmp(argv[i], "--steps")) num(steps);
    else if (!std::strcmp(argv[i], "--rounds")) num(rounds);
    else if (!std::strcmp(argv[i], "--program") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) only_mode = argv[++i];
    else if (!std::strcmp(argv[i], "--ops-per-step")) ops_only = true;
    else {
      std::fprintf(stderr, "usage: op_costs [--ops N] [--steps S] [--rounds R] [--program add|add_grad|linear] [--mode eager|lazy|coexec] [--ops-per-step]\n");
      return 2;
    }
  }
  Tensor b = full({1}, 0.5f), leaf;
  std::unique_ptr<nn::Linear> lin;
  Tensor x8;
  Program progs[] = {
      {"add", [] {},
       [&] {
         Tensor c = b;
         for (int64_t i = 0; i < n_ops; ++i) c = c + b;
       }},
      {"add_grad", [&] { leaf = full({1}, 1.0f);
         leaf.requires_grad_(true); },
       [&] {
         Tensor c = leaf;
         for (int64_t i = 0; i < n_ops / 2; ++i) c = c + b;
         c.sum().backward();
       }},
      {"linear", [&] {
         manual_seed(0);
         lin = std::make_unique<nn::Linear>(8, 8);
         x8 = randn({1, 8});
       },
       [&] {
         NoGradGuard ng;
         Tensor h = x8;
         for (int64_t i = 0; i < n_ops / 4; ++i) h = relu((*lin)(h));
       }},
  };
  const Mode modes[] = {Mode::Eager, Mode::Lazy, Mode::CoExecution};
  if (!ops_only)
    std::printf("%-9s %-7s %10s %12s %14s\n", "program", "mode", "wall us/op", "host us/op", "runner us/op");
  for (auto& p : progs) {
    if (!only.empty() && only != p.name) continue;
    p.setup();
    int64_t ops;
    {
      CountingExec ce;
      ExecutorScope scope(&ce);
      p.body();
      ops = ce.calls;
    }
    if (ops_only) {
      std::printf("%s %lld\n", p.name, static_cast<long long>(ops));
      continue;
    }
    struct Run {
      std::unique_ptr<Engine> engine;
      std::vector<double> wall, host, runner;
    };
    std::vector<Run> runs;
    for (Mode m : modes)
      if (only_mode.empty() || only_mode == mode_name(m)) runs.push_back({std::make_unique<Engine>(m), {}, {}, {}});
    for (auto& r : runs)
      for (int i = 0; i < 10; ++i) {  // tracing and graph generation
        auto s = r.engine->step();
        p.body();
      }
    for (int64_t round = 0; round < rounds; ++round)
      for (auto& r : runs) {
        r.engine->synchronize();
        Stats s0 = r.engine->stats();
        auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < steps; ++i) {
          auto s = r.engine->step();
          p.body();
        }
        r.engine->synchronize();
        double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        Stats s1 = r.engine->stats();
        double n = double(steps * ops);
        r.wall.push_back(1e6 * dt / n);
        r.host.push_back(1e6 * (s1.host_busy_s - s0.host_busy_s) / n);
        r.runner.push_back(1e6 * (s1.runner_busy_s - s0.runner_busy_s) / n);
      }
    for (auto& r : runs)
      std::printf("%-9s %-7s %10.3f %12.3f %14.3f\n", p.name, mode_name(r.engine->mode()), median(r.wall),
                  median(r.host), median(r.runner));
  }
  return 0;
}
