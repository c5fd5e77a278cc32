// terra-bench: runs Terra's ten evaluation programs (programs/*.cpp) in every execution mode and
// reports steps/s, speedup over eager, the engine's Stats (traces, fallbacks, host/runner busy and
// stall time: Terra Fig. 6), a lazy vs co-execution table (Terra Table 2), and checks that every
// mode's per-step losses equal eager's bit for bit. Docs: docs/terra-bench.md.
//
//   terra-bench --programs all|name,name --modes eager,lazy,coexec --steps N [--warmup W]
//               [--csv FILE [--plots DIR]] [--quick] [--seed S] [--torch FILE] [--timeout SEC]
//               [--threads N]  (terra::set_num_threads(N); default: terra's own choice)
//
// Each program x mode runs in a child process (this binary re-executed with --child) under
// `timeout`, so a crash or deadlock in one run fails that row instead of the whole benchmark. In
// the child, three runs, each with a fresh Engine and the same seed:
//   prime: max(W, 1) steps, untimed (process warm-up: thread pools, oneDNN primitive caches);
//   full:  N steps, timed from Engine construction to synchronize() -> total_s;
//   head:  W steps, timed the same way (skipped when W = 0);
//   --quick (small sizes) defaults to --steps 200 --warmup 20 --repeat 3: enough steps to measure.
//   with --repeat R, R rounds: every mode of a program runs once per round, each in its own child,
//   modes back to back, so a slow stretch of a shared machine hits the modes of a round alike.
//   steps/s is the median of the R rates; a mode's speedup is the median over rounds of that round's
//   ratio to eager (paired, so drift between rounds cancels). Every round's losses must be equal.
// steady-state steps/s = (N - W) / (total_s(full) - total_s(head)): the steps after warm-up, with
// setup (model, data) and whatever tracing happens in the first W steps subtracted. total_s is the
// whole N-step run including setup and all tracing. The runs are deterministic, so the first W
// steps of `full` do exactly what `head` does.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../programs/program.h"
#include "bench_probe.h"
#include "bench_table.h"

using namespace terra;
using namespace terra::programs;
using terra::bench::fmt;
using terra::bench::geomean;
using terra::bench::median_of;
using terra::bench::print_table;

namespace {

struct Options {
  std::vector<std::string> programs;  // empty = all
  std::vector<std::string> modes = {"eager", "lazy", "coexec"};
  int steps = 20;
  int warmup = 5;
  bool steps_set = false, warmup_set = false, repeat_set = false;
  std::string csv, plots, torch, plot_script;
  bool quick = false;
  uint64_t seed = 0;
  int timeout_s = 600;
  int repeat = 1;  // rounds of child runs per program (modes interleaved); steps/s is the median
  int threads = 0;  // --threads: terra::set_num_threads in parent and children
  bool threads_set = false;
  std::string child;  // "program:mode" in the child process
  bool probe = false;  // child: also measure memory and step latency (the first round's child)
};

// --quick's defaults (each unless given): steps, warm-up steps and rounds.
constexpr int kQuickSteps = 200, kQuickWarmup = 20, kQuickRepeat = 3;

[[noreturn]] void usage(const std::string& err) {
  std::fprintf(stderr,
               "%s%s"
               "usage: terra-bench --programs all|name,name --modes eager,lazy,coexec --steps N [--warmup W]\n"
               "                   [--csv FILE [--plots DIR]] [--quick] [--seed S] [--torch FILE] [--timeout SEC]\n"
               "                   [--repeat R] [--threads N] [--plot-script PATH] [--list]\n"
               "  steps/s is steady state over the N-W steps after warm-up; total_s includes setup and tracing.\n"
               "  Defaults: --steps 20 --warmup 5 --repeat 1; with --quick, --steps 200 --warmup 20 --repeat 3.\n"
               "  Losses must equal eager's exactly (tolerance 0); exit status 1 if not, or if a run failed.\n",
               err.c_str(), err.empty() ? "" : "\n");
  std::exit(2);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

int to_int(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || x < 0) usage(flag + " expects a non-negative integer, got '" + v + "'");
  return int(x);
}

const Program* find_program(const std::string& name) {
  for (const Program& p : all_programs())
    if (p.name == name) return &p;
  return nullptr;
}

// ---------------------------------------------------------------- child: one program in one mode

struct Timed {
  RunResult result;
  Stats stats;
  double wall_s = 0;
};

RunOptions run_options(const Options& o, int steps) {
  RunOptions ro;
  ro.steps = steps;
  ro.quick = o.quick;
  ro.seed = o.seed;
  return ro;
}

Timed timed_run(const Program& p, Mode m, int steps, const Options& o) {
  RunOptions ro = run_options(o, steps);
  auto t0 = std::chrono::steady_clock::now();
  Engine engine(m);
  Timed t;
  t.result = p.run(engine, ro);
  engine.synchronize();
  t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t.stats = engine.stats();
  return t;
}

void print_losses(const char* tag, const std::vector<double>& v) {
  std::printf("%s", tag);
  for (double l : v) std::printf(" %a", l);
  std::printf("\n");
}

int run_child(const Options& o) {
  size_t colon = o.child.find(':');
  const Program* p = find_program(o.child.substr(0, colon));
  if (!p) {
    std::printf("TB_ERROR unknown program\n");
    return 3;
  }
  Mode m = parse_mode(o.child.substr(colon + 1));
  try {
    // RSS growth: the process's high-water mark after the prime and full runs (same sizes) over its
    // RSS before either; the allocator's peak over the full run alone.
    const int64_t rss0 = bench::proc_status_kib("VmRSS");
    Timed prime = timed_run(*p, m, std::max(o.warmup, 1), o);
    reset_peak_memory();
    Timed full = timed_run(*p, m, o.steps, o);
    const int64_t alloc_peak = allocator_stats().peak_bytes_in_use;
    const int64_t hwm = bench::proc_status_kib("VmHWM");
    Timed head;
    if (o.warmup > 0) head = timed_run(*p, m, o.warmup, o);
    // Further timed pairs (--repeat): wall times only; Stats and losses come from the first pair.
    std::printf("TB_REPS %a %a", full.wall_s, head.wall_s);
    for (int r = 1; r < o.repeat; ++r) {
      double f = timed_run(*p, m, o.steps, o).wall_s;
      double h = o.warmup > 0 ? timed_run(*p, m, o.warmup, o).wall_s : 0.0;
      std::printf(" %a %a", f, h);
    }
    std::printf("\n");
    const Stats& s = full.stats;
    std::printf("TB_RESULT full_s=%a head_s=%a prime_s=%a steps=%lld traces=%lld fallbacks=%lld graphs=%lld "
                "host_busy=%a host_stall=%a runner_busy=%a runner_stall=%a lazy_hits=%lld lazy_misses=%lld\n",
                full.wall_s, head.wall_s, prime.wall_s, (long long)s.steps, (long long)s.traces,
                (long long)s.fallbacks, (long long)s.graph_generations, s.host_busy_s, s.host_stall_s,
                s.runner_busy_s, s.runner_stall_s, (long long)s.lazy_cache_hits, (long long)s.lazy_cache_misses);
    print_losses("TB_LOSSES", full.result.losses);
    // The shorter runs must reproduce the full run's first steps (same seed, deterministic).
    std::vector<double> prefix = prime.result.losses;
    if (o.warmup > 0) prefix.insert(prefix.end(), head.result.losses.begin(), head.result.losses.end());
    print_losses("TB_PREFIX", prefix);
    if (o.probe) {
      bench::StepLatency lat = bench::measure_step_latency(*p, m, run_options(o, o.steps), o.warmup);
      std::printf("%s\n", bench::probe_line(lat, rss0 >= 0 && hwm >= 0 ? hwm - rss0 : -1, alloc_peak).c_str());
    }
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::printf("TB_ERROR %s\n", what.c_str());
    std::fflush(stdout);
    return 3;
  }
  return 0;
}

// ---------------------------------------------------------------- parent

struct Row {
  std::string program, mode;
  bool ok = false;        // the child produced a result
  std::string error;      // why not, or the loss check's complaint
  double full_s = 0, head_s = 0, prime_s = 0;
  double steps_per_s = NAN, speedup = NAN;
  double sps_min = NAN, sps_max = NAN;  // over the --repeat pairs
  std::vector<double> reps;             // full_s, head_s, full_s, head_s, ...
  std::vector<double> rates;            // steps/s of each round (NAN: no rate that round)
  long long steps = 0, traces = 0, fallbacks = 0, graphs = 0, lazy_hits = 0, lazy_misses = 0;
  double host_busy = 0, host_stall = 0, runner_busy = 0, runner_stall = 0;
  std::vector<double> losses, prefix;
  std::string check = "n/a";  // "exact" | "DIFF" | "ref" | "n/a"
  // From the first round's child (TB_PROBE): memory, and step latency with every loss fetched.
  double rss_growth_mb = NAN, alloc_peak_mb = NAN;
  double first_ms = NAN, compiled_ms = NAN, steady_ms = NAN, steady_max_ms = NAN;
  int compiled_step = -1, steady_max_step = -1;
  double torch_eager = NAN, torch_jit = NAN;
};

std::string exe_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw std::runtime_error("readlink(/proc/self/exe) failed");
  buf[n] = 0;
  return buf;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

double parse_num(const std::string& w) { return std::strtod(w.c_str(), nullptr); }

std::vector<double> parse_list(const std::string& line) {
  std::vector<double> v;
  std::istringstream in(line);
  std::string w;
  in >> w;  // tag
  while (in >> w) v.push_back(parse_num(w));
  return v;
}

// A child's "k=v k=v" line as a map.
std::map<std::string, std::string> parse_kv(const std::string& words) {
  std::istringstream in(words);
  std::map<std::string, std::string> kv;
  for (std::string w; in >> w;) {
    size_t eq = w.find('=');
    if (eq != std::string::npos) kv[w.substr(0, eq)] = w.substr(eq + 1);
  }
  return kv;
}

Row run_one(const Options& o, const std::string& program, const std::string& mode, bool probe) {
  Row r;
  r.program = program;
  r.mode = mode;
  std::string cmd = "timeout " + std::to_string(o.timeout_s) + " " + shell_quote(exe_path()) + " --child " +
                    shell_quote(program + ":" + mode) + " --steps " + std::to_string(o.steps) + " --warmup " +
                    std::to_string(o.warmup) + " --seed " + std::to_string(o.seed) + " --repeat 1" + (o.quick ? " --quick" : "") +
                    " --threads " + std::to_string(num_threads()) + (probe ? " --probe" : "") + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) {
    r.error = "popen failed";
    return r;
  }
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
  int status = pclose(f);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::istringstream lines(out);
  std::string last_line;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) last_line = line;
    if (line.rfind("TB_RESULT ", 0) == 0) {
      std::map<std::string, std::string> kv = parse_kv(line.substr(10));
      r.full_s = parse_num(kv["full_s"]);
      r.head_s = parse_num(kv["head_s"]);
      r.prime_s = parse_num(kv["prime_s"]);
      r.steps = std::atoll(kv["steps"].c_str());
      r.traces = std::atoll(kv["traces"].c_str());
      r.fallbacks = std::atoll(kv["fallbacks"].c_str());
      r.graphs = std::atoll(kv["graphs"].c_str());
      r.host_busy = parse_num(kv["host_busy"]);
      r.host_stall = parse_num(kv["host_stall"]);
      r.runner_busy = parse_num(kv["runner_busy"]);
      r.runner_stall = parse_num(kv["runner_stall"]);
      r.lazy_hits = std::atoll(kv["lazy_hits"].c_str());
      r.lazy_misses = std::atoll(kv["lazy_misses"].c_str());
      r.ok = true;
    } else if (line.rfind("TB_PROBE ", 0) == 0) {
      std::map<std::string, std::string> kv = parse_kv(line.substr(9));
      double rss = parse_num(kv["rss_growth_kib"]);
      r.rss_growth_mb = rss >= 0 ? rss / 1024.0 : NAN;
      r.alloc_peak_mb = parse_num(kv["alloc_peak"]) / (1024.0 * 1024.0);
      r.first_ms = parse_num(kv["first_ms"]);
      r.compiled_step = std::atoi(kv["compiled_step"].c_str());
      r.compiled_ms = parse_num(kv["compiled_ms"]);
      r.steady_ms = parse_num(kv["steady_ms"]);
      r.steady_max_ms = parse_num(kv["steady_max_ms"]);
      r.steady_max_step = std::atoi(kv["steady_max_step"].c_str());
    } else if (line.rfind("TB_LOSSES", 0) == 0) {
      r.losses = parse_list(line);
    } else if (line.rfind("TB_REPS", 0) == 0) {
      r.reps = parse_list(line);
    } else if (line.rfind("TB_PREFIX", 0) == 0) {
      r.prefix = parse_list(line);
    } else if (line.rfind("TB_ERROR ", 0) == 0) {
      r.error = line.substr(9);
    }
  }
  if (code != 0 || !r.ok) {
    r.ok = false;
    if (r.error.empty())
      r.error = code == 124 ? "timed out after " + std::to_string(o.timeout_s) + " s (deadlock?)"
                            : "child exited with status " + std::to_string(code) + ": " + last_line;
    return r;
  }
  if (r.losses.size() != size_t(o.steps)) {
    r.ok = false;
    r.error = "expected " + std::to_string(o.steps) + " losses, got " + std::to_string(r.losses.size());
    return r;
  }
  int steady = o.steps - o.warmup;
  for (size_t i = 0; i + 1 < r.reps.size(); i += 2) {
    double dt = r.reps[i] - (o.warmup > 0 ? r.reps[i + 1] : 0.0);
    r.rates.push_back(steady > 0 && dt > 0 ? steady / dt : NAN);
  }
  return r;
}

// steps/s from the rounds' rates: their median, and their range.
void summarize_rates(Row& r) {
  r.steps_per_s = median_of(r.rates);
  r.sps_min = r.sps_max = NAN;
  for (double x : r.rates)
    if (std::isfinite(x)) {
      r.sps_min = std::isnan(r.sps_min) ? x : std::min(r.sps_min, x);
      r.sps_max = std::isnan(r.sps_max) ? x : std::max(r.sps_max, x);
    }
}

// a's rate over b's, round by round (the two ran back to back), then the median of those ratios.
double paired_ratio(const Row& a, const Row& b) {
  std::vector<double> q;
  for (size_t i = 0; i < a.rates.size() && i < b.rates.size(); ++i) q.push_back(a.rates[i] / b.rates[i]);
  return median_of(q);
}

// A later round's child run folded into the first round's row: its rate, and its losses, which
// must be the first round's (the runs are deterministic across processes too).
void add_round(Row& row, const Row& later) {
  if (!row.ok) return;
  if (!later.ok) {
    row.ok = false;
    row.error = "a later round failed: " + later.error;
    return;
  }
  row.rates.insert(row.rates.end(), later.rates.begin(), later.rates.end());
  if (row.check == "DIFF") return;
  if (later.check == "DIFF") {  // its own prefix check (check_prefix) failed
    row.check = "DIFF";
    row.error = "in a later round, " + later.error;
  } else if (later.losses != row.losses) {
    row.check = "DIFF";
    row.error = "not deterministic: a later round's losses differ from the first round's";
  }
}

// The W-step runs must reproduce the first W steps of the N-step run (determinism within a mode).
void check_prefix(Row& r, const Options& o) {
  size_t prime = size_t(std::max(o.warmup, 1));
  for (size_t i = 0; i < r.prefix.size(); ++i) {
    size_t step = i < prime ? i : i - prime;
    if (step < r.losses.size() && r.prefix[i] != r.losses[step]) {
      char buf[200];
      std::snprintf(buf, sizeof(buf), "not deterministic: a repeated run's step %zu loss %.9g != %.9g", step,
                    r.prefix[i], r.losses[step]);
      r.check = "DIFF";
      r.error = buf;
      return;
    }
  }
}

// Every step's loss against eager's: exact equality (tolerance 0).
void check_against(Row& r, const Row& eager) {
  if (!r.ok || !eager.ok) return;
  if (r.check == "DIFF") return;
  for (size_t i = 0; i < r.losses.size() && i < eager.losses.size(); ++i) {
    if (!(r.losses[i] == eager.losses[i])) {
      char buf[200];
      std::snprintf(buf, sizeof(buf), "step %zu loss %.17g != eager %.17g (diff %.3g)", i, r.losses[i],
                    eager.losses[i], r.losses[i] - eager.losses[i]);
      r.check = "DIFF";
      r.error = buf;
      return;
    }
  }
  r.check = "exact";
}

// torch CSV: program,framework,steps_per_s,final_loss[,...]; framework torch_eager / torch_jit.
void read_torch(const std::string& path, std::map<std::string, double>& eager, std::map<std::string, double>& jit) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read --torch file " + path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head = split(line, ',');
  auto col = [&](const char* name) {
    for (size_t i = 0; i < head.size(); ++i)
      if (head[i] == name) return int(i);
    throw std::runtime_error(std::string("--torch file lacks column ") + name + ": " + path);
  };
  int cp = col("program"), cf = col("framework"), cs = col("steps_per_s");
  while (std::getline(in, line)) {
    // Keep empty fields: split by hand.
    std::vector<std::string> f;
    std::string cur;
    for (char c : line) {
      if (c == ',') {
        f.push_back(cur);
        cur.clear();
      } else if (c != '\r') {
        cur += c;
      }
    }
    f.push_back(cur);
    if (int(f.size()) <= std::max({cp, cf, cs})) continue;
    double v = f[size_t(cs)].empty() ? NAN : parse_num(f[size_t(cs)]);
    if (f[size_t(cf)] == "torch_eager") eager[f[size_t(cp)]] = v;
    if (f[size_t(cf)] == "torch_jit") jit[f[size_t(cp)]] = v;
  }
}

std::string csv_field(std::string s) {
  for (char& c : s)
    if (c == ',' || c == '\n' || c == '"') c = ';';
  return s;
}

std::string plot_script_path(const Options& o) {
  std::vector<std::string> cands;
  if (!o.plot_script.empty()) cands.push_back(o.plot_script);
  if (const char* e = std::getenv("TERRA_BENCH_PLOT_SCRIPT")) cands.push_back(e);
  std::string src = __FILE__;  // <repo>/tools/terra_bench.cpp
  size_t slash = src.rfind('/');
  if (slash != std::string::npos) cands.push_back(src.substr(0, slash) + "/../bench/plot_bench.py");
  std::string exe = exe_path();
  std::string dir = exe.substr(0, exe.rfind('/'));
  cands.push_back(dir + "/../bench/plot_bench.py");
  cands.push_back(dir + "/../share/terra/plot_bench.py");
  for (auto& c : cands)
    if (access(c.c_str(), R_OK) == 0) return c;
  return "";
}

const char* env_or(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v ? v : dflt;
}

int run_parent(Options& o) {
  if (o.csv.empty() && !o.plots.empty()) usage("--plots DIR needs --csv FILE (the plots are drawn from it)");
  if (o.steps < 1) usage("--steps must be >= 1");
  if (!o.warmup_set) o.warmup = std::min(o.warmup, o.steps / 4);
  if (o.warmup >= o.steps) usage("--warmup must be smaller than --steps");
  std::vector<std::string> names;
  if (o.programs.empty() || (o.programs.size() == 1 && o.programs[0] == "all")) {
    // The paper's order (Terra §5.1), then any other registered program.
    for (const char* n : {"resnet", "bert_qa", "yolov3", "dcgan", "gpt2", "bert_cls", "dropblock", "sdpoint",
                          "faster_rcnn", "music_transformer"})
      if (find_program(n)) names.push_back(n);
    for (const Program& p : all_programs())
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
  } else {
    for (auto& n : o.programs) {
      if (!find_program(n)) {
        std::string known;
        for (const Program& p : all_programs()) known += " " + p.name;
        usage("unknown program '" + n + "'; known:" + known);
      }
      names.push_back(n);
    }
  }
  std::vector<std::string> modes;
  for (auto& m : o.modes) {
    try {
      modes.push_back(mode_name(parse_mode(m)));
    } catch (const std::exception& e) {
      usage(std::string("bad --modes entry: ") + e.what());
    }
  }
  // Eager is the reference for the speedup and the loss check: always run it, first.
  modes.erase(std::remove(modes.begin(), modes.end(), std::string(mode_name(Mode::Eager))), modes.end());
  modes.insert(modes.begin(), mode_name(Mode::Eager));
  const std::string eager_name = mode_name(Mode::Eager), lazy_name = mode_name(Mode::Lazy),
                    co_name = mode_name(Mode::CoExecution);

  std::map<std::string, double> torch_eager, torch_jit;
  if (!o.torch.empty()) read_torch(o.torch, torch_eager, torch_jit);

  std::printf("terra-bench: %zu programs x %zu modes, %d steps (%d warm-up), seed %llu%s, %d timed repetition%s\n",
              names.size(), modes.size(), o.steps, o.warmup, (unsigned long long)o.seed, o.quick ? ", quick sizes" : "",
              o.repeat, o.repeat == 1 ? "" : "s (modes interleaved per round; steps/s = median, speedup = median of paired ratios)");
  std::printf("  threads: %d (terra::num_threads(); OMP_NUM_THREADS=%s, %u hardware threads)\n", num_threads(),
              env_or("OMP_NUM_THREADS", "unset"), std::thread::hardware_concurrency());
  std::printf("  steps/s = steady state over the %d steps after warm-up: (N-W) / (wall of the N-step run - wall of\n"
              "            the W-step run), fresh Engine per run, wall from Engine construction to synchronize();\n"
              "  total_s = wall of the whole N-step run, including model/data setup and all tracing.\n"
              "  check   = every step's loss equals eager's exactly (tolerance 0, bit-identical).\n",
              o.steps - o.warmup);
  std::fflush(stdout);

  std::vector<Row> rows;
  const size_t total = names.size() * modes.size() * size_t(o.repeat);  // child runs
  size_t k = 0;
  for (auto& name : names) {
    const size_t first = rows.size();  // eager's row (modes[0]); the program's rows follow it
    // Round 1 makes the rows (Stats, losses, checks); later rounds add one rate per mode each.
    for (int round = 0; round < o.repeat; ++round) {
      for (size_t m = 0; m < modes.size(); ++m) {
        const std::string& mode = modes[m];
        std::printf("[%zu/%zu] %s %s%s ... ", ++k, total, name.c_str(),
                    mode.c_str(), o.repeat > 1 ? (" round " + std::to_string(round + 1) + "/" + std::to_string(o.repeat)).c_str() : "");
        std::fflush(stdout);
        Row r = run_one(o, name, mode, /*probe=*/round == 0);
        if (r.ok) check_prefix(r, o);
        if (round > 0) {
          add_round(rows[first + m], r);
        } else {
          rows.push_back(r);
          Row& row = rows.back();
          if (mode == eager_name) {
            if (row.check != "DIFF" && row.ok) row.check = "ref";
          } else {
            check_against(row, rows[first]);
          }
        }
        const Row& row = rows[first + m];
        if (r.ok && row.ok)
          std::printf("%.2f steps/s (total %.2f s, %lld traces, %lld fallbacks) %s%s\n", r.rates.empty() ? NAN : r.rates[0],
                      r.full_s, r.traces, r.fallbacks, row.check.c_str(), row.check == "DIFF" ? (": " + row.error).c_str() : "");
        else
          std::printf("FAILED: %s\n", (r.ok ? row.error : r.error).c_str());
        std::fflush(stdout);
      }
    }
    for (size_t i = first; i < rows.size(); ++i) {
      Row& row = rows[i];
      summarize_rates(row);
      const Row& eager = rows[first];
      if (eager.ok && row.ok) row.speedup = i == first ? 1.0 : paired_ratio(row, eager);
      if (o.repeat > 1 && row.ok)
        std::printf("  %s %s: %.2f steps/s [%s..%s], %sx eager (median of the rounds' ratios)\n", name.c_str(),
                    row.mode.c_str(), row.steps_per_s, fmt("%.2f", row.sps_min).c_str(), fmt("%.2f", row.sps_max).c_str(),
                    fmt("%.2f", row.speedup).c_str());
      auto te = torch_eager.find(name);
      if (te != torch_eager.end()) row.torch_eager = te->second;
      auto tj = torch_jit.find(name);
      if (tj != torch_jit.end()) row.torch_jit = tj->second;
    }
  }

  // ---- main table
  const bool with_torch = !o.torch.empty();
  std::printf("\n== steps/s per program and mode (steady state; speedup = steps/s / eager's)\n");
  std::vector<std::string> head = {"program", "mode", "steps/s", "speedup", "total_s", "traces", "fallbacks",
                                   "graphs", "final_loss", "check"};
  if (with_torch) {
    head.insert(head.end(), {"torch_eager", "terra/torch", "torch_jit", "terra/jit"});
  }
  std::vector<std::vector<std::string>> table;
  for (auto& r : rows) {
    std::vector<std::string> t = {r.program, r.mode};
    if (!r.ok) {
      t.insert(t.end(), {"-", "-", "-", "-", "-", "-", "-", "FAILED"});
    } else {
      t.insert(t.end(), {fmt("%.2f", r.steps_per_s), fmt("%.2fx", r.speedup), fmt("%.2f", r.full_s),
                         std::to_string(r.traces), std::to_string(r.fallbacks), std::to_string(r.graphs),
                         fmt("%.6g", r.losses.back()), r.check});
    }
    if (with_torch)
      t.insert(t.end(), {fmt("%.2f", r.torch_eager), fmt("%.2fx", r.steps_per_s / r.torch_eager),
                         fmt("%.2f", r.torch_jit), fmt("%.2fx", r.steps_per_s / r.torch_jit)});
    table.push_back(t);
  }
  print_table(head, table);
  // Geometric means of the speedups per mode.
  std::printf("geomean speedup vs eager:");
  for (auto& m : modes) {
    std::vector<double> v;
    for (auto& r : rows)
      if (r.mode == m) v.push_back(r.speedup);
    std::printf("  %s %s", m.c_str(), fmt("%.2fx", geomean(v)).c_str());
  }
  std::printf("\n");
  if (with_torch) {
    std::printf("geomean terra/torch_eager:");
    for (auto& m : modes) {
      std::vector<double> v;
      for (auto& r : rows)
        if (r.mode == m) v.push_back(r.steps_per_s / r.torch_eager);
      std::printf("  %s %s", m.c_str(), fmt("%.2fx", geomean(v)).c_str());
    }
    std::printf("\n");
  }

  // ---- co-execution runner breakdown (Terra Fig. 6)
  bool any_co = std::find(modes.begin(), modes.end(), co_name) != modes.end();
  if (any_co) {
    std::printf("\n== co-execution breakdown over the whole N-step run (Terra Fig. 6): seconds and %% of total_s\n");
    std::vector<std::vector<std::string>> t;
    for (auto& r : rows) {
      if (r.mode != co_name || !r.ok) continue;
      auto pct = [&](double s) { return fmt("%.2f", s) + " (" + fmt("%.0f", 100.0 * s / r.full_s) + "%)"; };
      t.push_back({r.program, pct(r.host_busy), pct(r.host_stall), pct(r.runner_busy), pct(r.runner_stall),
                   fmt("%.2f", r.full_s), std::to_string(r.traces), std::to_string(r.graphs)});
    }
    print_table({"program", "host_busy", "host_stall", "runner_busy", "runner_stall", "total_s", "traces", "graphs"},
                t, 1);
  }

  // ---- memory and step latency (first round's child)
  std::printf("\n== memory and step latency (first round's child): RSS growth = the process's peak RSS over its RSS\n"
              "   before the runs; alloc_peak = terra's allocator, tensors in use at once. Latencies from a further\n"
              "   run that fetches every step's loss: step 0, the first step co-execution ran on a generated\n"
              "   graph (its first fused-kernel assembly included), and the median / slowest step after warm-up.\n");
  {
    std::vector<std::vector<std::string>> t;
    int co_rows = 0, co_leq = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const Row* eager = nullptr;
      for (const Row& e : rows)
        if (e.program == r.program && e.mode == eager_name) eager = &e;
      if (!r.ok) continue;
      double rss_vs = eager && eager->ok ? r.rss_growth_mb / eager->rss_growth_mb : NAN;
      if (r.mode == co_name && std::isfinite(rss_vs)) {
        ++co_rows;
        co_leq += r.rss_growth_mb <= eager->rss_growth_mb;
      }
      t.push_back({r.program, r.mode, fmt("%.1f", r.rss_growth_mb), fmt("%.2fx", rss_vs), fmt("%.1f", r.alloc_peak_mb),
                   fmt("%.1f", r.first_ms),
                   r.compiled_step >= 0 ? fmt("%.1f", r.compiled_ms) + " (" + std::to_string(r.compiled_step) + ")" : "-",
                   fmt("%.2f", r.steady_ms),
                   fmt("%.2f", r.steady_max_ms) + (r.steady_max_step >= 0 ? " (" + std::to_string(r.steady_max_step) + ")" : "")});
    }
    print_table({"program", "mode", "rss_growth_MB", "vs_eager", "alloc_peak_MB", "step0_ms", "compiled_ms (step)",
                 "steady_ms", "max_ms (step)"},
                t);
    if (co_rows)
      std::printf("co-execution RSS growth <= eager's on %d of %d programs\n", co_leq, co_rows);
  }

  // ---- lazy vs co-execution (Terra Table 2)
  bool any_lazy = std::find(modes.begin(), modes.end(), lazy_name) != modes.end();
  if (any_co && any_lazy) {
    std::printf("\n== lazy vs co-execution (Terra Table 2): steady-state steps/s\n");
    std::vector<std::vector<std::string>> t;
    std::vector<double> ratios;
    for (auto& name : names) {
      const Row *lz = nullptr, *co = nullptr;
      for (auto& r : rows) {
        if (r.program != name || !r.ok) continue;
        if (r.mode == lazy_name) lz = &r;
        if (r.mode == co_name) co = &r;
      }
      double l = lz ? lz->steps_per_s : NAN, c = co ? co->steps_per_s : NAN;
      double q = lz && co ? paired_ratio(*co, *lz) : NAN;  // round by round, like the speedups
      ratios.push_back(q);
      t.push_back({name, fmt("%.2f", l), fmt("%.2f", c), fmt("%.2fx", q),
                   lz ? std::to_string(lz->lazy_misses) + "/" + std::to_string(lz->lazy_hits + lz->lazy_misses) : "-"});
    }
    t.push_back({"geomean", "", "", fmt("%.2fx", geomean(ratios)), ""});
    print_table({"program", "lazy", "coexec", "coexec/lazy", "lazy_compiles"}, t, 1);
  }

  // ---- CSV (optional: without --csv the table above is the whole report)
  if (!o.csv.empty()) {
    std::ofstream out(o.csv);
    if (!out) throw std::runtime_error("cannot write " + o.csv);
    out << "program,mode,steps_per_s,speedup_vs_eager,traces,fallbacks,final_loss,loss_check,first_loss,total_s,"
           "steps,warmup,graph_generations,host_busy_s,host_stall_s,runner_busy_s,runner_stall_s,"
           "lazy_cache_hits,lazy_cache_misses,threads,quick,repeat,steps_per_s_min,steps_per_s_max,rss_growth_mb,"
           "alloc_peak_mb,step0_ms,compiled_step,compiled_ms,steady_step_ms,steady_max_step_ms,error";
    if (with_torch) out << ",torch_eager_steps_per_s,terra_over_torch_eager,torch_jit_steps_per_s,terra_over_torch_jit";
    out << "\n";
    auto num = [](double v) {
      if (std::isnan(v)) return std::string();
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.17g", v);
      return std::string(buf);
    };
    for (auto& r : rows) {
      out << r.program << "," << r.mode << "," << num(r.steps_per_s) << "," << num(r.speedup) << ","
          << (r.ok ? std::to_string(r.traces) : "") << "," << (r.ok ? std::to_string(r.fallbacks) : "") << ","
          << (r.ok && !r.losses.empty() ? num(r.losses.back()) : "") << "," << (r.ok ? r.check : "FAILED") << ","
          << (r.ok && !r.losses.empty() ? num(r.losses.front()) : "") << "," << num(r.ok ? r.full_s : NAN) << ","
          << o.steps << "," << o.warmup << "," << (r.ok ? std::to_string(r.graphs) : "") << ","
          << num(r.ok ? r.host_busy : NAN) << "," << num(r.ok ? r.host_stall : NAN) << ","
          << num(r.ok ? r.runner_busy : NAN) << "," << num(r.ok ? r.runner_stall : NAN) << ","
          << (r.ok ? std::to_string(r.lazy_hits) : "") << "," << (r.ok ? std::to_string(r.lazy_misses) : "") << ","
          << num_threads() << "," << (o.quick ? 1 : 0) << "," << o.repeat << ","
          << num(r.sps_min) << "," << num(r.sps_max) << "," << num(r.rss_growth_mb) << "," << num(r.alloc_peak_mb)
          << "," << num(r.first_ms) << "," << (r.compiled_step >= 0 ? std::to_string(r.compiled_step) : "") << ","
          << num(r.compiled_step >= 0 ? r.compiled_ms : NAN) << "," << num(r.steady_ms) << "," << num(r.steady_max_ms)
          << "," << csv_field(r.error);
      if (with_torch)
        out << "," << num(r.torch_eager) << "," << num(r.steps_per_s / r.torch_eager) << "," << num(r.torch_jit)
            << "," << num(r.steps_per_s / r.torch_jit);
      out << "\n";
    }
    std::printf("\nCSV: %s\n", o.csv.c_str());
  }

  // ---- plots
  int plot_status = 0;
  if (!o.plots.empty()) {
    std::string script = plot_script_path(o);
    if (script.empty()) {
      std::fprintf(stderr, "terra-bench: bench/plot_bench.py not found (use --plot-script PATH); no plots\n");
      plot_status = 1;
    } else {
      std::string cmd = "/usr/bin/python3 " + shell_quote(script) + " " + shell_quote(o.csv) + " " + shell_quote(o.plots);
      std::fflush(stdout);
      int st = std::system(cmd.c_str());
      if (st != 0) {
        std::fprintf(stderr, "terra-bench: plotting failed (%s)\n", cmd.c_str());
        plot_status = 1;
      }
    }
  }

  // ---- verdict
  int failures = 0;
  for (auto& r : rows)
    if (!r.ok || r.check == "DIFF") {
      if (!failures) std::printf("\nFAILURES:\n");
      ++failures;
      std::printf("  %s %s: %s\n", r.program.c_str(), r.mode.c_str(),
                  r.ok ? ("loss check: " + r.error).c_str() : r.error.c_str());
    }
  if (failures) {
    std::printf("terra-bench: %d of %zu runs failed or differ from eager\n", failures, rows.size());
    return 1;
  }
  std::printf("terra-bench: all %zu runs finished; every mode's losses equal eager's exactly\n", rows.size());
  return plot_status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) usage(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--programs") o.programs = split(value(i), ',');
    else if (a == "--modes") o.modes = split(value(i), ',');
    else if (a == "--steps") o.steps = to_int(a, value(i)), o.steps_set = true;
    else if (a == "--warmup") o.warmup = to_int(a, value(i)), o.warmup_set = true;
    else if (a == "--csv") o.csv = value(i);
    else if (a == "--plots") o.plots = value(i);
    else if (a == "--plot-script") o.plot_script = value(i);
    else if (a == "--torch") o.torch = value(i);
    else if (a == "--quick") o.quick = true;
    else if (a == "--seed") o.seed = uint64_t(to_int(a, value(i)));
    else if (a == "--timeout") o.timeout_s = to_int(a, value(i));
    else if (a == "--child") o.child = value(i);
    else if (a == "--probe") o.probe = true;
    else if (a == "--repeat") o.repeat = std::max(1, to_int(a, value(i))), o.repeat_set = true;
    else if (a == "--threads") o.threads = to_int(a, value(i)), o.threads_set = true;
    else if (a == "--list") {
      for (const Program& p : all_programs()) std::printf("%-18s %s\n", p.name.c_str(), p.feature.c_str());
      return 0;
    } else if (a == "-h" || a == "--help") usage("");
    else usage("unknown argument " + a);
  }
  if (o.quick && o.child.empty()) {
    // Quick sizes take ~0.3-2 ms a step: 15 timed steps are a window of a few ms, in which this
    // machine's jitter and one fallback decide the ratio (docs/terra-bench.md, "Quick runs").
    // Quick runs get steps enough to measure instead: ~15 s for all ten programs in two modes.
    if (!o.steps_set) o.steps = kQuickSteps;
    if (!o.warmup_set && !o.steps_set) o.warmup = kQuickWarmup, o.warmup_set = true;
    if (!o.repeat_set) o.repeat = kQuickRepeat;
  }
  try {
    if (o.threads_set) set_num_threads(o.threads);
    if (!o.child.empty()) return run_child(o);
    return run_parent(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "terra-bench: %s\n", e.what());
    return 2;
  }
}
