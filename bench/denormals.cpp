// What denormal floats cost issue #9's MLP (4 linears 256 wide, batch 16, Adam, mlp_modes' eight
// batches), eager at one thread: the median update (Adam) and step time of each window of steps,
// with terra's kernels flushing denormals (the default) and with IEEE gradual underflow. Adam's
// moments of weights whose gradient stays 0 shrink by beta1 = 0.9 a step and reach the denormal range
// after several hundred steps (core/float_env.h).
//
//   denormals [--steps N] [--window W]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <terra/terra.h>

using namespace terra;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Per window: {median update us, median step us}.
std::vector<std::pair<double, double>> train(int steps, int window) {
  manual_seed(1);
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < 8; ++i) {
    xs.push_back(randn({16, 256}));
    ys.push_back(randint(0, 10, {16}));
  }
  manual_seed(0);
  std::vector<std::unique_ptr<nn::Linear>> fcs;
  std::vector<Tensor> params;
  for (int l = 0; l < 4; ++l) {
    fcs.push_back(std::make_unique<nn::Linear>(256, l == 3 ? 10 : 256));
    for (const Tensor& p : fcs.back()->parameters()) params.push_back(p);
  }
  optim::Adam opt(params, 1e-3);
  std::vector<std::pair<double, double>> out;
  std::vector<double> upd, step;
  for (int it = 0; it < steps; ++it) {
    const auto t0 = Clock::now();
    Tensor h = xs[size_t(it % 8)];
    for (int l = 0; l < 4; ++l) {
      h = (*fcs[size_t(l)])(h);
      if (l < 3) h = relu(h);
    }
    Tensor loss = nn::functional::cross_entropy(h, ys[size_t(it % 8)]);
    opt.zero_grad();
    loss.backward();
    const auto t1 = Clock::now();
    opt.step();
    (void)loss.item<float>();
    const auto t2 = Clock::now();
    upd.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    step.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
    if ((it + 1) % window == 0) {
      out.push_back({median(upd), median(step)});
      upd.clear();
      step.clear();
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 1600, window = 200;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--window") && i + 1 < argc) window = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: denormals [--steps N] [--window W]\n");
      return 2;
    }
  }
  set_num_threads(1);
  set_flush_denormal(true);
  const auto flushed = train(steps, window);
  set_flush_denormal(false);
  const auto ieee = train(steps, window);
  set_flush_denormal(true);
  std::printf("issue #9's MLP, eager, 1 thread: median us per step of each %d-step window\n", window);
  std::printf("%-13s %14s %14s %14s %14s\n", "steps", "update flushed", "update IEEE", "step flushed", "step IEEE");
  for (size_t w = 0; w < flushed.size(); ++w)
    std::printf("%5zu-%-7zu %14.1f %14.1f %14.1f %14.1f\n", w * size_t(window), (w + 1) * size_t(window) - 1,
                flushed[w].first, ieee[w].first, flushed[w].second, ieee[w].second);
  return 0;
}
