// Terra's ten evaluation programs (programs/): each runs in Eager, Lazy and CoExecution with the
// same losses bit for bit (same kernels in the same order), and learns in eager.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

#include "program.h"

using namespace terra;
using namespace terra::programs;

namespace {

const Program& find_program(const std::string& name) {
  for (const Program& p : all_programs())
    if (p.name == name) return p;
  throw std::invalid_argument("no program named " + name);
}

RunResult run_in(const Program& p, Mode m, int steps, bool quick, std::vector<double>* seen = nullptr) {
  Engine engine(m);
  RunOptions o;
  o.steps = steps;
  o.quick = quick;
  o.seed = 3;
  if (seen) o.on_step = [seen](int, double l) { seen->push_back(l); };
  RunResult r = p.run(engine, o);
  engine.synchronize();
  return r;
}

const char* const kPrograms[] = {"resnet", "bert_qa",    "yolov3",  "dcgan",       "gpt2",
                                 "bert_cls", "dropblock", "sdpoint", "faster_rcnn", "music_transformer"};

constexpr int kModeSteps = 8;

// The graph modes run in a child process (this binary, re-executed for ProgramsChild.RunFromEnv
// under `timeout`), so a deadlock or crash in the engine fails one test instead of hanging the run.
TEST(ProgramsChild, RunFromEnv) {
  const char* spec = std::getenv("TERRA_PROGRAMS_CHILD");
  if (!spec) GTEST_SKIP() << "runs only as the child of ProgramTest.SameLossesInEveryMode";
  std::string s = spec;
  size_t colon = s.find(':');
  const Program& p = find_program(s.substr(0, colon));
  std::vector<double> seen;  // the per-step fetch through on_step
  RunResult r = run_in(p, parse_mode(s.substr(colon + 1)), kModeSteps, true, &seen);
  std::printf("TERRA_LOSSES");
  for (double l : r.losses) std::printf(" %a", l);
  std::printf("\nTERRA_SEEN");
  for (double l : seen) std::printf(" %a", l);
  std::printf("\n");
  std::fflush(stdout);
}

struct ChildRun {
  int exit_code = -1;
  std::string output;
  RunResult result;
  std::vector<double> seen;
};

ChildRun run_in_child(const std::string& program, const char* mode) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) throw std::runtime_error("readlink(/proc/self/exe) failed");
  exe[len] = 0;
  std::string cmd = "TERRA_PROGRAMS_CHILD=" + program + ":" + mode + " timeout 30 '" + exe +
                    "' --gtest_filter=ProgramsChild.RunFromEnv 2>&1";
  ChildRun c;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) throw std::runtime_error("popen failed");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) c.output.append(buf, n);
  int status = pclose(f);
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::istringstream lines(c.output);
  for (std::string line; std::getline(lines, line);) {
    std::vector<double>* into = line.rfind("TERRA_LOSSES", 0) == 0 ? &c.result.losses
                                : line.rfind("TERRA_SEEN", 0) == 0 ? &c.seen
                                                                   : nullptr;
    if (!into) continue;
    std::istringstream words(line.substr(line.find(' ') == std::string::npos ? line.size() : line.find(' ')));
    for (std::string w; words >> w;) into->push_back(std::strtod(w.c_str(), nullptr));
  }
  return c;
}

std::string tail(const std::string& s) { return s.size() > 1500 ? "..." + s.substr(s.size() - 1500) : s; }

class ProgramTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ProgramTest, SameLossesInEveryMode) {
  const Program& p = find_program(GetParam());
  const int steps = kModeSteps;
  RunResult eager = run_in(p, Mode::Eager, steps, true);
  ChildRun lazy_run = run_in_child(GetParam(), "lazy");
  ChildRun co_run = run_in_child(GetParam(), "coexec");
  EXPECT_EQ(lazy_run.exit_code, 0) << "lazy" << (lazy_run.exit_code == 124 ? " timed out (deadlock?)" : "") << ":\n"
                                   << tail(lazy_run.output);
  ASSERT_EQ(co_run.exit_code, 0) << "coexec" << (co_run.exit_code == 124 ? " timed out (deadlock?)" : "") << ":\n"
                                 << tail(co_run.output);
  ASSERT_EQ(lazy_run.exit_code, 0);
  const RunResult& lazy = lazy_run.result;
  const RunResult& co = co_run.result;
  const std::vector<double>& seen = co_run.seen;
  ASSERT_EQ(eager.losses.size(), size_t(steps));
  ASSERT_EQ(lazy.losses.size(), size_t(steps));
  ASSERT_EQ(co.losses.size(), size_t(steps));
  ASSERT_EQ(seen.size(), size_t(steps));
  for (int i = 0; i < steps; ++i) {
    EXPECT_TRUE(std::isfinite(eager.losses[size_t(i)])) << "step " << i;
    EXPECT_EQ(eager.losses[size_t(i)], lazy.losses[size_t(i)]) << "lazy, step " << i;
    EXPECT_EQ(eager.losses[size_t(i)], co.losses[size_t(i)]) << "coexec, step " << i;
    EXPECT_EQ(co.losses[size_t(i)], seen[size_t(i)]) << "on_step, step " << i;
  }
  EXPECT_EQ(eager.first_loss, eager.losses.front());
  EXPECT_EQ(eager.final_loss, eager.losses.back());
}

// Default sizes: the mean loss of the last few steps is below that of the first few.
TEST_P(ProgramTest, LearnsInEager) {
  const Program& p = find_program(GetParam());
  const int steps = 24, window = 4;
  RunResult r = run_in(p, Mode::Eager, steps, false);
  ASSERT_EQ(r.losses.size(), size_t(steps));
  double first = 0, last = 0;
  for (int i = 0; i < window; ++i) {
    first += r.losses[size_t(i)];
    last += r.losses[size_t(steps - window + i)];
  }
  EXPECT_LT(last, first * 0.9) << GetParam() << ": first " << first / window << ", last " << last / window;
}

INSTANTIATE_TEST_SUITE_P(Programs, ProgramTest, ::testing::ValuesIn(std::vector<std::string>(std::begin(kPrograms), std::end(kPrograms))),
                         [](const auto& info) { return info.param; });

TEST(Programs, AllTenRegisteredWithAFeature) {
  std::set<std::string> names;
  for (const Program& p : all_programs()) {
    names.insert(p.name);
    EXPECT_FALSE(p.feature.empty()) << p.name;
    EXPECT_TRUE(p.run) << p.name;
  }
  for (const char* n : kPrograms) EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(all_programs().size(), std::size(kPrograms));
}

}  // namespace
