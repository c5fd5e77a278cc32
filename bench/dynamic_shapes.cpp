// Issue #11's shape-varying loops in every mode, side by side in one process: the token model (a
// random batch 4..16 and length 16..96 each step, a fetched count deciding a slice) and a CNN whose
// last batch of each epoch is smaller. Prints steps/s, speedup vs eager, traces, fallbacks, graph
// generations, and whether every step's loss equals eager's.
// Usage: dynamic_shapes [--steps 70] [--repeat 3] [--workloads token_model,cnn_last_batch]
//                       [--modes eager,lazy,coexec]   (eager always runs: it is the reference)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../programs/dynamic_workloads.h"

using namespace terra;

namespace {

struct Run {
  double seconds = 0;
  std::vector<double> losses;
  Stats stats;
};

Run run_once(Mode m, const std::function<std::vector<double>(Engine&)>& train) {
  Engine e(m);
  auto t0 = std::chrono::steady_clock::now();
  Run r;
  r.losses = train(e);  // fetches every loss at the end: the time includes the last step's work
  e.synchronize();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.stats = e.stats();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 70, repeat = 3;
  std::string only = "token_model,cnn_last_batch", mode_list = "eager,lazy,coexec";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--workloads")) only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--modes")) mode_list = argv[i + 1];
    else {
      std::fprintf(stderr, "dynamic_shapes: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  auto listed = [](const std::string& list, const std::string& name) {
    return ("," + list + ",").find("," + name + ",") != std::string::npos;
  };
  struct Workload {
    const char* name;
    std::function<std::vector<double>(Engine&)> train;
  };
  std::vector<Workload> loads = {
      {"token_model", [&](Engine& e) { return workloads::train_token_model(e, steps); }},
      {"cnn_last_batch", [&](Engine& e) { return workloads::train_cnn_last_batch(e, steps); }},
  };
  std::vector<Mode> modes = {Mode::Eager};  // the reference every other mode is compared with
  if (listed(mode_list, "lazy")) modes.push_back(Mode::Lazy);
  if (listed(mode_list, "coexec")) modes.push_back(Mode::CoExecution);
  std::printf("%-15s %-7s %9s %8s %7s %10s %7s %7s  %s\n", "workload", "mode", "steps/s", "vs eager", "traces",
              "fallbacks", "graphs", "exact", "coexec ms/step: host busy, host stall, runner busy, runner stall");
  bool all_exact = true;
  for (const Workload& w : loads) {
    if (!listed(only, w.name)) continue;
    // Best of `repeat`, modes alternating within each round (the machine is shared and noisy).
    const int nm = int(modes.size());
    std::vector<Run> best(size_t(nm), Run{});
    for (int r = 0; r < repeat; ++r)
      for (int k = 0; k < nm; ++k) {
        Run x = run_once(modes[k], w.train);
        if (r == 0 || x.seconds < best[size_t(k)].seconds) best[size_t(k)] = x;
      }
    for (int k = 0; k < nm; ++k) {
      const Run& x = best[size_t(k)];
      bool exact = x.losses == best[0].losses;
      all_exact &= exact;
      std::printf("%-15s %-7s %9.1f %7.2fx %7lld %10lld %7lld %7s", w.name, mode_name(modes[k]), steps / x.seconds,
                  best[0].seconds / x.seconds, (long long)x.stats.traces, (long long)x.stats.fallbacks,
                  (long long)x.stats.graph_generations, k == 0 ? "ref" : exact ? "yes" : "NO");
      const Stats& st = x.stats;
      if (modes[k] == Mode::CoExecution)
        std::printf("  %.2f, %.2f, %.2f, %.2f", 1e3 * st.host_busy_s / steps, 1e3 * st.host_stall_s / steps,
                    1e3 * st.runner_busy_s / steps, 1e3 * st.runner_stall_s / steps);
      std::printf("\n");
    }
  }
  std::printf("%s\n", all_exact ? "every mode's losses equal eager's exactly" : "MISMATCH: a mode differs from eager");
  return all_exact ? 0 : 1;
}
