// Terra's ten evaluation programs (programs/): each runs in Eager, Lazy and CoExecution with the
// same losses bit for bit (same kernels in the same order), and learns in eager.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
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

class ProgramTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ProgramTest, SameLossesInEveryMode) {
  const Program& p = find_program(GetParam());
  const int steps = 8;
  RunResult eager = run_in(p, Mode::Eager, steps, true);
  RunResult lazy = run_in(p, Mode::Lazy, steps, true);
  std::vector<double> seen;  // co-execution with a per-step fetch through on_step
  RunResult co = run_in(p, Mode::CoExecution, steps, true, &seen);
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
