// The 4-layer MLP of issue #9 (256 wide, batch 16, Adam, loss.item() every step) trained in each
// mode in ONE process, the modes interleaved round by round so machine noise hits them alike.
// Prints steps/s per mode (median over rounds), co-execution / eager, host and runner time per step
// (busy wall time from Engine::stats, and CPU time of the host thread and the runner thread),
// and checks that every mode's losses equal eager's bit for bit. No environment variable is read:
// run it as a user would.
//
//   mlp_modes [--width W] [--batch B] [--layers L] [--steps N] [--rounds R] [--sgd] [--threads T]
//             [--modes eager,lazy,coexec]   (a subset, e.g. one mode to profile; eager always runs first)
#include <algorithm>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <terra/terra.h>

using namespace terra;

namespace {

struct Opts {
  int64_t width = 256, batch = 16, layers = 4, steps = 200, rounds = 5, threads = 0;  // 0: terra's default
  bool sgd = false;
  std::string modes = "eager,lazy,coexec";
};

class Mlp : public nn::Module {
 public:
  Mlp(int64_t width, int64_t layers) {
    for (int64_t i = 0; i < layers; ++i) {
      fcs.push_back(std::make_unique<nn::Linear>(width, i + 1 == layers ? 10 : width));
      register_module("fc" + std::to_string(i), *fcs.back());
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (size_t i = 0; i < fcs.size(); ++i) {
      h = (*fcs[i])(h);
      if (i + 1 < fcs.size()) h = relu(h);
    }
    return h;
  }
  std::string name() const override { return "Mlp"; }
  std::vector<std::unique_ptr<nn::Linear>> fcs;
};

struct Run {
  Run(Mode m, const Opts& o) : engine(m) {
    manual_seed(1);
    {
      NoGradGuard ng;
      for (int i = 0; i < 8; ++i) {
        xs.push_back(randn({o.batch, o.width}));
        ys.push_back(randint(0, 10, {o.batch}));
      }
    }
    manual_seed(0);
    model = std::make_unique<Mlp>(o.width, o.layers);
    if (o.sgd) opt = std::make_unique<optim::SGD>(model->parameters(), 0.01, 0.9);
    else opt = std::make_unique<optim::Adam>(model->parameters(), 1e-3);
  }
  // Not inlined: the warm-up and the timed loop call it from two places in main, and inlined copies
  // would be two call sites to the tracer (a new path, one more trace and fallback, mid-timing).
  __attribute__((noinline)) float step() {
    auto s = engine.step();
    const Tensor& x = xs[size_t(next % 8)];
    const Tensor& y = ys[size_t(next % 8)];
    next++;
    Tensor loss = nn::functional::cross_entropy((*model)(x), y);
    opt->zero_grad();
    loss.backward();
    opt->step();
    return loss.item<float>();
  }
  Engine engine;
  std::vector<Tensor> xs, ys;
  std::unique_ptr<Mlp> model;
  std::unique_ptr<optim::Optimizer> opt;
  int64_t next = 0;
  std::vector<float> losses;
  std::vector<double> rates;
  double host_cpu = 0, runner_cpu = 0;  // timed rounds only, seconds
  int64_t timed_steps = 0;
};

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    auto num = [&](int64_t& v) { v = i + 1 < argc ? std::atoll(argv[++i]) : v; };
    if (!std::strcmp(argv[i], "--width")) num(o.width);
    else if (!std::strcmp(argv[i], "--batch")) num(o.batch);
    else if (!std::strcmp(argv[i], "--layers")) num(o.layers);
    else if (!std::strcmp(argv[i], "--steps")) num(o.steps);
    else if (!std::strcmp(argv[i], "--rounds")) num(o.rounds);
    else if (!std::strcmp(argv[i], "--sgd")) o.sgd = true;
    else if (!std::strcmp(argv[i], "--threads")) num(o.threads);
    else if (!std::strcmp(argv[i], "--modes") && i + 1 < argc) o.modes = argv[++i];
    else {
      std::fprintf(stderr, "usage: mlp_modes [--width W] [--batch B] [--layers L] [--steps N] [--rounds R] "
                           "[--sgd] [--threads T] [--modes eager,lazy,coexec]\n");
      return 2;
    }
  }
  if (o.threads != 0) set_num_threads(int(o.threads));  // throws for T < 1
  const Mode modes[] = {Mode::Eager, Mode::Lazy, Mode::CoExecution};
  std::vector<std::unique_ptr<Run>> runs;
  for (Mode m : modes)
    if (m == Mode::Eager || o.modes.find(mode_name(m)) != std::string::npos) runs.push_back(std::make_unique<Run>(m, o));
  // Eager is the reference for losses and ratios; it runs untimed when not asked for.
  const bool time_eager = o.modes.find("eager") != std::string::npos;
  for (auto& r : runs)  // warm-up: tracing, graph generation, caches
    for (int i = 0; i < 20; ++i) r->losses.push_back(r->step());
  for (int64_t round = 0; round < o.rounds; ++round)
    for (auto& r : runs) {
      if (!time_eager && r == runs[0]) {
        for (int64_t i = 0; i < o.steps; ++i) r->losses.push_back(r->step());
        continue;
      }
      double c0 = thread_cpu_s(), rc0 = r->engine.stats().runner_cpu_s;
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < o.steps; ++i) r->losses.push_back(r->step());
      r->engine.synchronize();
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      r->host_cpu += thread_cpu_s() - c0;
      r->runner_cpu += r->engine.stats().runner_cpu_s - rc0;
      r->timed_steps += o.steps;
      r->rates.push_back(double(o.steps) / dt);
    }
  std::printf("MLP %lld layers, width %lld, batch %lld, %s, loss.item() every step, "
              "%lld rounds x %lld steps, %d threads\n",
              (long long)o.layers, (long long)o.width, (long long)o.batch, o.sgd ? "SGD momentum" : "Adam",
              (long long)o.rounds, (long long)o.steps, num_threads());
  std::printf("%-8s %10s %9s %8s %8s %13s %15s %13s %15s  %s\n", "mode", "steps/s", "vs eager", "traces", "fallbk",
              "host us/step", "runner us/step", "host cpu us", "runner cpu us", "losses");
  bool exact = true;
  double eager = time_eager ? median(runs[0]->rates) : 0;
  for (auto& r : runs) {
    Stats s = r->engine.stats();
    bool same = r->losses == runs[0]->losses;
    exact &= same;
    if (!time_eager && &r == &runs[0]) continue;
    double steps = double(s.steps);
    double ts = double(std::max<int64_t>(r->timed_steps, 1));
    std::printf("%-8s %10.1f %8.2fx %8lld %8lld %13.1f %15.1f %13.1f %15.1f  %s\n", mode_name(r->engine.mode()),
                median(r->rates), eager > 0 ? median(r->rates) / eager : 0.0, (long long)s.traces, (long long)s.fallbacks,
                1e6 * s.host_busy_s / steps, 1e6 * s.runner_busy_s / steps, 1e6 * r->host_cpu / ts,
                1e6 * r->runner_cpu / ts,
                &r == &runs[0] ? "ref" : same ? "exact" : "DIFFER");
  }
  for (auto& r : runs) {
    Stats s = r->engine.stats();
    if (s.side_heavy_ops)
      std::printf("%s: %.1f heavy ops a step ran on a spare core, beside %.1f ops on the runner\n",
                  mode_name(r->engine.mode()), double(s.side_heavy_ops) / double(s.steps),
                  double(s.side_ops) / double(s.steps));
  }
  return exact ? 0 : 1;
}
