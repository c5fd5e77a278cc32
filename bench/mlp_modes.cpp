// The 4-layer MLP of issue #9 (256 wide, batch 16, Adam, loss.item() every step), or issue #8's
// transformer encoder and residual CNN (--model), trained in each mode in ONE process, the modes
// interleaved round by round so machine noise hits them alike.
// Prints steps/s per mode (median over rounds), co-execution / eager, host and runner time per step
// (busy wall time from Engine::stats, and CPU time of the host thread and the runner thread),
// and checks that every mode's losses equal eager's bit for bit. No environment variable is read:
// run it as a user would.
//
//   mlp_modes [--width W] [--batch B] [--layers L] [--steps N] [--rounds R] [--sgd] [--threads T]
//             [--modes eager,lazy,coexec]   (a subset, e.g. one mode to profile; eager always runs first)
//             [--alone]                     (no eager reference beside the modes asked for: a profile
//                                           of one mode alone; losses unchecked)
//             [--ieee-denormals]            (set_flush_denormal(false): denormals as IEEE and torch
//                                           have them; Adam's moments reach them after ~700 steps)
//             [--model mlp|encoder|cnn]
//             [--memory eager|lazy|coexec]  (that mode alone, untimed: peak RSS growth and allocator peak;
//                                           run once per mode, each in its own process)
// encoder: 2 post-norm layers written from plain ops (matmul, softmax, LayerNorm, relu), d_model 128,
//          4 heads, seq 64, batch 8 (--batch), mean over the sequence, a 10-way head.
// cnn:     conv-BN-relu stem (16 ch), two residual blocks, a stride-2 stage (32 ch) and one block,
//          global average pool, a 10-way head; 3x32x32 inputs, batch 16.
#include <algorithm>
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <terra/terra.h>

#include "../tools/bench_probe.h"

using namespace terra;

namespace {

struct Opts {
  int64_t width = 256, batch = 0 /* the model's: 8 encoder, else 16 */, layers = 4, steps = 200, rounds = 5, threads = 0;  // 0: terra's default
  bool sgd = false;
  std::string modes = "eager,lazy,coexec";
  std::string model = "mlp";
  std::string memory;  // --memory MODE: that mode alone, memory only
  bool alone = false;  // --alone: no untimed eager reference beside the modes asked for (losses unchecked)
  bool ieee_denormals = false;  // --ieee-denormals: terra::set_flush_denormal(false)
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

class EncoderLayer : public nn::Module {
 public:
  EncoderLayer(int64_t d, int64_t heads)
      : heads_(heads), q(d, d), k(d, d), v(d, d), proj(d, d), ff1(d, 4 * d), ff2(4 * d, d), n1(d), n2(d) {
    register_module("q", q), register_module("k", k), register_module("v", v), register_module("proj", proj);
    register_module("ff1", ff1), register_module("ff2", ff2), register_module("n1", n1), register_module("n2", n2);
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.shape()[0], s = x.shape()[1], d = x.shape()[2], dh = d / heads_;
    auto split = [&](const Tensor& t) { return transpose(reshape(t, {b, s, heads_, dh}), 1, 2); };
    Tensor scores = matmul(split(q(x)), transpose(split(k(x)), -2, -1)) * (1.0 / std::sqrt(double(dh)));
    Tensor a = reshape(transpose(matmul(softmax(scores, -1), split(v(x))), 1, 2), {b, s, d});
    Tensor h = n1(x + proj(a));
    return n2(h + ff2(relu(ff1(h))));
  }
  std::string name() const override { return "EncoderLayer"; }

 private:
  int64_t heads_;
  nn::Linear q, k, v, proj, ff1, ff2;
  nn::LayerNorm n1, n2;
};

class Encoder : public nn::Module {
 public:
  Encoder(int64_t d, int64_t heads, int64_t layers) : head(d, 10) {
    for (int64_t i = 0; i < layers; ++i) {
      blocks.push_back(std::make_unique<EncoderLayer>(d, heads));
      register_module("layer" + std::to_string(i), *blocks.back());
    }
    register_module("head", head);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& b : blocks) h = (*b)(h);
    return head(mean(h, {1}));
  }
  std::string name() const override { return "Encoder"; }
  std::vector<std::unique_ptr<EncoderLayer>> blocks;
  nn::Linear head;
};

class ConvBn : public nn::Module {
 public:
  ConvBn(int64_t in, int64_t out, int64_t stride) : conv(in, out, 3, stride, 1, 1, 1, false), bn(out) {
    register_module("conv", conv), register_module("bn", bn);
  }
  Tensor forward(const Tensor& x) override { return bn(conv(x)); }
  std::string name() const override { return "ConvBn"; }
  nn::Conv2d conv;
  nn::BatchNorm2d bn;
};

class ResBlock : public nn::Module {
 public:
  explicit ResBlock(int64_t c) : a(c, c, 1), b(c, c, 1) { register_module("a", a), register_module("b", b); }
  Tensor forward(const Tensor& x) override { return relu(b(relu(a(x))) + x); }
  std::string name() const override { return "ResBlock"; }
  ConvBn a, b;
};

class ResCnn : public nn::Module {
 public:
  ResCnn() : stem(3, 16, 1), r1(16), r2(16), down(16, 32, 2), r3(32), head(32, 10) {
    register_module("stem", stem), register_module("r1", r1), register_module("r2", r2);
    register_module("down", down), register_module("r3", r3), register_module("head", head);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = r2(r1(relu(stem(x))));
    h = r3(relu(down(h)));
    return head(reshape(adaptive_avg_pool2d(h, {1, 1}), {h.shape()[0], 32}));
  }
  std::string name() const override { return "ResCnn"; }
  ConvBn stem;
  ResBlock r1, r2;
  ConvBn down;
  ResBlock r3;
  nn::Linear head;
};

std::unique_ptr<nn::Module> make_model(const Opts& o) {
  if (o.model == "encoder") return std::make_unique<Encoder>(128, 4, 2);
  if (o.model == "cnn") return std::make_unique<ResCnn>();
  return std::make_unique<Mlp>(o.width, o.layers);
}

Shape input_shape(const Opts& o) {
  if (o.model == "encoder") return {o.batch, 64, 128};
  if (o.model == "cnn") return {o.batch, 3, 32, 32};
  return {o.batch, o.width};
}

struct Run {
  Run(Mode m, const Opts& o) : engine(m) {
    manual_seed(1);
    {
      NoGradGuard ng;
      for (int i = 0; i < 8; ++i) {
        xs.push_back(randn(input_shape(o)));
        ys.push_back(randint(0, 10, {o.batch}));
      }
    }
    manual_seed(0);
    model = make_model(o);
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
  std::unique_ptr<nn::Module> model;
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
    else if (!std::strcmp(argv[i], "--model") && i + 1 < argc) o.model = argv[++i];
    else if (!std::strcmp(argv[i], "--memory") && i + 1 < argc) o.memory = argv[++i];
    else if (!std::strcmp(argv[i], "--alone")) o.alone = true;
    else if (!std::strcmp(argv[i], "--ieee-denormals")) o.ieee_denormals = true;
    else {
      std::fprintf(stderr, "usage: mlp_modes [--width W] [--batch B] [--layers L] [--steps N] [--rounds R] "
                           "[--sgd] [--threads T] [--modes eager,lazy,coexec] [--alone] [--ieee-denormals] [--model mlp|encoder|cnn] "
                           "[--memory eager|lazy|coexec]\n");
      return 2;
    }
  }
  if (o.model != "mlp" && o.model != "encoder" && o.model != "cnn") {
    std::fprintf(stderr, "mlp_modes: --model is mlp, encoder or cnn\n");
    return 2;
  }
  if (o.batch == 0) o.batch = o.model == "encoder" ? 8 : 16;  // issue #8's encoder and CNN, issue #9's MLP
  if (o.threads != 0) set_num_threads(int(o.threads));  // throws for T < 1
  if (o.ieee_denormals) set_flush_denormal(false);
  if (!o.memory.empty()) {
    // Memory of one mode in this process: RSS growth from before the model is built.
    Mode m;
    try {
      m = parse_mode(o.memory);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mlp_modes: --memory: %s\n", e.what());
      return 2;
    }
    const int64_t rss0 = bench::proc_status_kib("VmRSS");
    Run r(m, o);
    for (int64_t i = 0; i < 20 + o.rounds * o.steps; ++i) r.losses.push_back(r.step());
    r.engine.synchronize();
    std::printf("%s %s: peak RSS growth %.1f MB, allocator peak %.1f MB over %zu steps\n", o.model.c_str(),
                o.memory.c_str(), double(bench::proc_status_kib("VmHWM") - rss0) / 1024.0,
                double(allocator_stats().peak_bytes_in_use) / (1024.0 * 1024.0), r.losses.size());
    return 0;
  }
  const Mode modes[] = {Mode::Eager, Mode::Lazy, Mode::CoExecution};
  std::vector<std::unique_ptr<Run>> runs;
  for (Mode m : modes)
    if ((m == Mode::Eager && !o.alone) || o.modes.find(mode_name(m)) != std::string::npos)
      runs.push_back(std::make_unique<Run>(m, o));
  // Eager is the reference for losses and ratios; it runs untimed when not asked for.
  const bool time_eager = o.modes.find("eager") != std::string::npos;
  const bool untimed_ref = !time_eager && !o.alone;  // runs[0]: eager, run only for its losses
  for (auto& r : runs)  // warm-up: tracing, graph generation, caches
    for (int i = 0; i < 20; ++i) r->losses.push_back(r->step());
  for (int64_t round = 0; round < o.rounds; ++round)
    for (auto& r : runs) {
      if (untimed_ref && r == runs[0]) {
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
  if (o.model == "mlp")
    std::printf("MLP %lld layers, width %lld, ", (long long)o.layers, (long long)o.width);
  else
    std::printf("%s, ", o.model == "encoder" ? "transformer encoder (2 layers, d_model 128, 4 heads, seq 64)"
                                              : "residual CNN with BatchNorm (3x32x32)");
  std::printf("batch %lld, %s, loss.item() every step, %lld rounds x %lld steps, %d threads\n", (long long)o.batch,
              o.sgd ? "SGD momentum" : "Adam", (long long)o.rounds, (long long)o.steps, num_threads());
  std::printf("%-8s %10s %9s %8s %8s %13s %15s %13s %15s  %s\n", "mode", "steps/s", "vs eager", "traces", "fallbk",
              "host us/step", "runner us/step", "host cpu us", "runner cpu us", "losses");
  bool exact = true;
  double eager = time_eager ? median(runs[0]->rates) : 0;
  for (auto& r : runs) {
    Stats s = r->engine.stats();
    bool same = r->losses == runs[0]->losses;
    exact &= same;
    if (untimed_ref && &r == &runs[0]) continue;
    double steps = double(s.steps);
    double ts = double(std::max<int64_t>(r->timed_steps, 1));
    std::printf("%-8s %10.1f %8.2fx %8lld %8lld %13.1f %15.1f %13.1f %15.1f  %s\n", mode_name(r->engine.mode()),
                median(r->rates), eager > 0 ? median(r->rates) / eager : 0.0, (long long)s.traces, (long long)s.fallbacks,
                1e6 * s.host_busy_s / steps, 1e6 * s.runner_busy_s / steps, 1e6 * r->host_cpu / ts,
                1e6 * r->runner_cpu / ts,
                runs[0]->engine.mode() != Mode::Eager ? "unchecked"
                : &r == &runs[0]                       ? "ref"
                : same                                 ? "exact"
                                                       : "DIFFER");
  }
  for (auto& r : runs) {
    Stats s = r->engine.stats();
    if (s.fused_kernels)
      std::printf("%s: %.1f fused elementwise kernels a step, replacing %.1f ops\n", mode_name(r->engine.mode()),
                  double(s.fused_kernels) / double(s.steps), double(s.fused_ops) / double(s.steps));
    if (s.side_heavy_ops)
      std::printf("%s: %.1f heavy ops a step ran on a spare core, beside %.1f ops on the runner\n",
                  mode_name(r->engine.mode()), double(s.side_heavy_ops) / double(s.steps),
                  double(s.side_ops) / double(s.steps));
  }
  return exact ? 0 : 1;
}
