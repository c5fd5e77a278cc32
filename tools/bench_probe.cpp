#include "bench_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "bench_table.h"

namespace terra::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct Mark {
  int64_t ended_steps, traces, graphs;  // the engine's counters when the step's loss arrived
};

}  // namespace

StepLatency measure_step_latency(const programs::Program& p, Mode m, const programs::RunOptions& base, int warmup) {
  StepLatency out;
  std::vector<Mark> marks;
  Clock::time_point prev{};
  Engine engine(m);
  programs::RunOptions ro = base;
  ro.on_loop_start = [&] { prev = Clock::now(); };
  ro.on_step = [&](int, double) {
    auto t = Clock::now();
    out.step_ms.push_back(std::chrono::duration<double, std::milli>(t - prev).count());
    prev = t;
    Stats s = engine.stats();
    marks.push_back({s.steps, s.traces, s.graph_generations});
  };
  p.run(engine, ro);
  engine.synchronize();
  Stats fin = engine.stats();
  const size_t n = marks.size();
  // The counters move when a step ends. A program's loss arrives inside its step (the counters then
  // show the steps before it) or after the step ended (they include it): `ended_steps` tells which.
  auto after = [&](size_t k, auto field) -> int64_t {
    if (marks[k].ended_steps > int64_t(k)) return field(marks[k]);
    return k + 1 < n ? field(marks[k + 1]) : field(Mark{fin.steps, fin.traces, fin.graph_generations});
  };
  auto traces = [](const Mark& x) { return x.traces; };
  auto graphs = [](const Mark& x) { return x.graphs; };
  if (m == Mode::CoExecution)
    for (size_t k = 1; k < n; ++k)
      if (after(k - 1, graphs) > 0 && after(k, traces) == after(k - 1, traces)) {
        out.compiled_step = int(k);
        out.compiled_ms = out.step_ms[k];
        break;
      }
  std::vector<double> steady(out.step_ms.begin() + std::min<size_t>(size_t(std::max(warmup, 0)), n), out.step_ms.end());
  out.steady_median_ms = median_of(steady);
  out.steady_max_ms = steady.empty() ? NAN : *std::max_element(steady.begin(), steady.end());
  if (!steady.empty())
    out.steady_max_step = int(n - steady.size() + size_t(std::max_element(steady.begin(), steady.end()) - steady.begin()));
  return out;
}

std::string probe_line(const StepLatency& l, int64_t rss_growth_kib, int64_t alloc_peak_bytes) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "TB_PROBE rss_growth_kib=%lld alloc_peak=%lld first_ms=%a compiled_step=%d compiled_ms=%a "
                "steady_ms=%a steady_max_ms=%a steady_max_step=%d",
                (long long)rss_growth_kib, (long long)alloc_peak_bytes, l.step_ms.empty() ? NAN : l.step_ms[0],
                l.compiled_step, l.compiled_step >= 0 ? l.compiled_ms : NAN, l.steady_median_ms, l.steady_max_ms,
                l.steady_max_step);
  return buf;
}

}  // namespace terra::bench
