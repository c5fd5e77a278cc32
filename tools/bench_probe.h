// What terra-bench's child measures besides wall time: the process's memory (RSS from /proc, the
// allocator's peak) and each step's latency in a run that fetches every step's loss, so the first
// step that runs on a generated graph and any step that waits for a compilation show up.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "../programs/program.h"

namespace terra::bench {

// A field of /proc/self/status in KiB ("VmRSS", "VmHWM"); -1 where it cannot be read. Inline: the
// benchmarks in bench/ read it too.
inline int64_t proc_status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  const size_t n = std::strlen(field);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') return std::atoll(line.c_str() + n + 1);
  return -1;
}

// One run with the loss fetched after every step (RunOptions::on_step), timed from the loop's start.
struct StepLatency {
  std::vector<double> step_ms;  // latency of each step: from the previous step's loss (or the loop's start)
  // Co-execution: the first step that ran on a generated graph without tracing, and its latency
  // (which includes what that graph's first run compiles); -1 / NAN where none did.
  int compiled_step = -1;
  double compiled_ms = 0;
  double steady_median_ms = 0, steady_max_ms = 0;  // over the steps after warm-up
  int steady_max_step = -1;
};

StepLatency measure_step_latency(const programs::Program& p, Mode m, const programs::RunOptions& base, int warmup);

// The child's TB_PROBE line: "k=v" words (terra_bench.cpp parses them).
std::string probe_line(const StepLatency& l, int64_t rss_growth_kib, int64_t alloc_peak_bytes);

}  // namespace terra::bench
