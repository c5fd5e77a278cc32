// Eager cost of the fused ops' public calls (cross_entropy forward and forward + backward, linear
// forward and forward + sum + backward) at the programs' shapes and a few larger ones: the calling
// thread's CPU time, best batch mean of 7, so other processes on a shared machine inflate it less.
// It calls the public API only, so one binary times another libterra build too:
//   LD_LIBRARY_PATH=/path/to/other/build build/fused_ops [threads (default 1)]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include <terra/terra.h>

using namespace terra;

double best_us(const std::function<void()>& f, int iters) {
  for (int i = 0; i < iters / 4 + 2; ++i) f();
  double best = 1e30;
  for (int b = 0; b < 7; ++b) {
    // CPU time of this thread: with 1 thread every kernel runs here, and time spent descheduled
    // by other processes on the machine does not count.
    timespec a, z;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (int i = 0; i < iters; ++i) f();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &z);
    double us = ((z.tv_sec - a.tv_sec) * 1e9 + double(z.tv_nsec - a.tv_nsec)) / 1e3 / iters;
    best = std::min(best, us);
  }
  return best;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  set_num_threads(threads);
  manual_seed(0);
  std::printf("threads %d\n", threads);
  for (auto [n, c] : std::vector<std::pair<int64_t, int64_t>>{{512, 32}, {512, 48}, {16, 3}, {256, 1000}, {4096, 512}}) {
    Tensor x = randn({n, c}), t = randint(0, c, {n});
    x.requires_grad_();
    int iters = int(std::max<int64_t>(20, 4000000 / (n * c + 2000)));
    double fwd = best_us([&] { NoGradGuard g; cross_entropy(x, t); }, iters);
    double both = best_us([&] { cross_entropy(x, t).backward(); x.set_grad({}); }, iters);
    std::printf("cross_entropy [%ld, %ld]          fwd %9.2f us   fwd+bwd %9.2f us\n", long(n), long(c), fwd, both);
  }
  for (auto [m, k, o] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {16, 256, 256}, {16, 256, 10}, {512, 64, 64}, {512, 64, 256}, {512, 256, 64}, {4096, 256, 256}}) {
    Tensor x = randn({m, k}), w = randn({o, k}) * 0.1, b = randn({o});
    w.requires_grad_();
    b.requires_grad_();
    int iters = int(std::max<int64_t>(20, 20000000 / (m * k * o + 20000)));
    double fwd = best_us([&] { NoGradGuard g; linear(x, w, b); }, iters);
    double both = best_us([&] { linear(x, w, b).sum().backward(); w.set_grad({}); b.set_grad({}); }, iters);
    std::printf("linear [%ld, %ld] -> %ld            fwd %9.2f us   fwd+sum+bwd %9.2f us\n", long(m), long(k), long(o), fwd, both);
  }
  return 0;
}
