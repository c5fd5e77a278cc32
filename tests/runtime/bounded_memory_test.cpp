// A program whose traces never converge must not make co-execution grow without bound: the engine
// stops co-executing it, releases the TraceGraph and runs it eagerly. (A new shape every step is
// no longer such a program: shapes are symbolic. A new input source every step still is.)
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <terra/terra.h>

using namespace terra;
namespace F = terra::nn::functional;

namespace {

double rss_mib() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return double(resident) * 4096.0 / (1024.0 * 1024.0);
}

// Every step a new batch size and a reshape whose attribute carries it: each trace is new.
void changing_shapes_step(nn::Linear& fc, optim::SGD& opt, int s) {
  int64_t b = 1 + (s * 7919) % 512;
  Tensor x = randn({b * 2, 16});
  for (int k = 0; k < 8; ++k) x = x.reshape({b * 32}).reshape({b, 32}) * 1.0;  // shapes carried as attributes
  Tensor y = tensor(std::vector<int64_t>(size_t(b), 1), {b});
  Tensor loss = F::cross_entropy(fc(x), y);
  opt.zero_grad();
  loss.backward();
  opt.step();
  if (s % 10 == 0) loss.item<float>();
}

// Every step reads a value from a different number of loop iterations back: the consumer's input
// has a new source (its age) every step, so no trace repeats for 300 steps.
void new_source_step(nn::Linear& fc, optim::SGD& opt, int s) {
  Tensor x = randn({4, 32});
  std::vector<Tensor> hist;
  for (int k = 0; k < 300; ++k) hist.push_back(x = x * 1.0);
  Tensor h = hist[size_t(299 - s % 300)];
  Tensor loss = F::cross_entropy(fc(h), tensor(std::vector<int64_t>(4, 1), {4}));
  opt.zero_grad();
  loss.backward();
  opt.step();
  if (s % 10 == 0) loss.item<float>();
}

}  // namespace

TEST(BoundedMemory, NeverConvergingTracesStopCoExecutionAndKeepRssFlat) {
  manual_seed(0);
  nn::Linear fc(32, 8);
  optim::SGD opt(fc.parameters(), 0.01);
  Engine eng(Mode::CoExecution);
  double at200 = 0;
  for (int s = 0; s < 2000; ++s) {
    auto st = eng.step();
    new_source_step(fc, opt, s);
    if (s == 199) at200 = rss_mib();
  }
  eng.synchronize();
  double at2000 = rss_mib();
  Stats stats = eng.stats();
  std::printf("[bounded-memory] RSS %.1f MiB at step 200, %.1f MiB at step 2000; traces %lld, coexec_disabled %d\n",
              at200, at2000, (long long)stats.traces, int(stats.coexec_disabled));
  EXPECT_TRUE(stats.coexec_disabled);
  EXPECT_LE(stats.traces, 140) << "co-execution must stop tracing a program that never converges";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers' allocators keep freed memory in quarantine: RSS says nothing there.
  (void)at200;
  (void)at2000;
#else
  EXPECT_LT(at2000 - at200, 8.0) << "RSS grew from " << at200 << " to " << at2000 << " MiB";
#endif
}

// A program that converges is never given up, however long it runs.
TEST(BoundedMemory, ConvergingProgramKeepsCoExecuting) {
  manual_seed(0);
  nn::Linear fc(32, 8);
  optim::SGD opt(fc.parameters(), 0.01);
  Engine eng(Mode::CoExecution);
  for (int s = 0; s < 300; ++s) {
    auto st = eng.step();
    changing_shapes_step(fc, opt, s % 3);  // three shapes, over and over
  }
  eng.synchronize();
  EXPECT_FALSE(eng.stats().coexec_disabled);
  EXPECT_LE(eng.stats().traces, 8);
}
