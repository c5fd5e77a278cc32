// terra-bench end to end: runs the binary (built next to terra_tests, target terra-bench) with
// --quick on two programs in all three modes and checks its CSV: the columns, one row per
// program x mode, eager as the reference, and the exact loss check; then --repeat's rounds. Skipped when the binary was
// not built (e.g. `ninja terra_tests` only).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string bench_binary() {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) return "";
  exe[len] = 0;
  std::string dir = exe;
  dir = dir.substr(0, dir.rfind('/'));
  std::string bin = dir + "/terra-bench";
  return access(bin.c_str(), X_OK) == 0 ? bin : "";
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> f;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      f.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  f.push_back(cur);
  return f;
}

int run(const std::string& cmd, std::string* out) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) out->append(buf, n);
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// terra-bench's CSV: the header's column indices and the rows.
struct Csv {
  std::map<std::string, size_t> col;
  std::vector<std::vector<std::string>> rows;
  std::string header;
};

Csv read_csv(const std::string& path) {
  Csv c;
  std::ifstream in(path);
  if (!in) return c;
  std::getline(in, c.header);
  std::vector<std::string> head = split_csv(c.header);
  for (size_t i = 0; i < head.size(); ++i) c.col[head[i]] = i;
  for (std::string line; std::getline(in, line);) c.rows.push_back(split_csv(line));
  return c;
}

TEST(TerraBench, QuickCsvHasOneCheckedRowPerProgramAndMode) {
  std::string bin = bench_binary();
  if (bin.empty()) GTEST_SKIP() << "terra-bench not built next to terra_tests";
  // Per process: concurrent test runs on one machine must not share the file.
  std::string csv = testing::TempDir() + "terra_bench_test_" + std::to_string(getpid()) + ".csv";
  std::string out;
  // No warm-up steps: steady-state steps/s is then the full run's rate. With warm-up it is (full -
  // head) of two separate runs, which a loaded machine can make non-positive over 4 steps (no rate).
  int code = run("OMP_WAIT_POLICY=PASSIVE '" + bin +
                     "' --programs resnet,gpt2 --modes eager,lazy,coexec --steps 4 --warmup 0 --repeat 1 --quick --timeout 120 "
                     "--csv '" + csv + "'",
                 &out);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("[6/6] gpt2 coexec"), std::string::npos) << out;
  EXPECT_NE(out.find("lazy vs co-execution"), std::string::npos) << out;

  Csv c = read_csv(csv);
  ASSERT_FALSE(c.header.empty()) << csv;
  auto& col = c.col;
  const auto& rows = c.rows;
  const size_t columns = col.size();
  for (const char* name : {"program", "mode", "steps_per_s", "speedup_vs_eager", "traces", "fallbacks", "final_loss",
                           "loss_check", "total_s", "host_busy_s", "runner_busy_s"})
    ASSERT_TRUE(col.count(name)) << "missing column " << name << " in: " << c.header;
  ASSERT_EQ(rows.size(), 6u);
  const char* modes[] = {"eager", "lazy", "coexec"};
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    ASSERT_EQ(r.size(), columns);
    EXPECT_EQ(r[col["program"]], i < 3 ? "resnet" : "gpt2");
    EXPECT_EQ(r[col["mode"]], modes[i % 3]);
    EXPECT_GT(std::stod(r[col["steps_per_s"]]), 0.0);
    EXPECT_EQ(r[col["loss_check"]], i % 3 == 0 ? "ref" : "exact");
    // Same final loss in every mode of a program, exactly (printed with 17 significant digits).
    EXPECT_EQ(r[col["final_loss"]], rows[i - i % 3][col["final_loss"]]);
    if (i % 3 == 0) {
      EXPECT_EQ(r[col["speedup_vs_eager"]], "1");
      EXPECT_EQ(r[col["traces"]], "0");
    }
    // Memory and step latency of the first round's child: real numbers in every mode; the first
    // compiled step only in co-execution, after the traced step 0.
    EXPECT_GT(std::stod(r[col["alloc_peak_mb"]]), 0.0) << c.header;
    EXPECT_GE(std::stod(r[col["rss_growth_mb"]]), 0.0);
    EXPECT_GT(std::stod(r[col["step0_ms"]]), 0.0);
    EXPECT_GT(std::stod(r[col["steady_step_ms"]]), 0.0);
    EXPECT_GE(std::stod(r[col["steady_max_step_ms"]]), std::stod(r[col["steady_step_ms"]]));
    if (i % 3 == 2) {
      EXPECT_GE(std::stoi(r[col["compiled_step"]]), 1);
      EXPECT_GT(std::stod(r[col["compiled_ms"]]), 0.0);
    } else {
      EXPECT_EQ(r[col["compiled_step"]], "");
    }
  }
  EXPECT_NE(out.find("== memory and step latency"), std::string::npos) << out;
}

// --repeat R: rounds with the modes interleaved, each mode a child per round; the row's steps/s is
// the median of its rounds and lies within the reported range, eager's paired speedup is exactly 1,
// and every round's losses passed the exact check.
TEST(TerraBench, RepeatRunsInterleavedRounds) {
  std::string bin = bench_binary();
  if (bin.empty()) GTEST_SKIP() << "terra-bench not built next to terra_tests";
  std::string csv = testing::TempDir() + "terra_bench_rounds_" + std::to_string(getpid()) + ".csv";
  std::string out;
  int code = run("'" + bin + "' --programs dcgan --modes eager,coexec --steps 4 --warmup 0 --quick --repeat 3 "
                 "--timeout 120 --csv '" + csv + "'", &out);
  ASSERT_EQ(code, 0) << out;
  // Round by round: eager then coexec, three times, in that order.
  size_t at = 0;
  for (const char* line : {"dcgan eager round 1/3", "dcgan coexec round 1/3", "dcgan eager round 2/3",
                           "dcgan coexec round 2/3", "dcgan eager round 3/3", "dcgan coexec round 3/3"}) {
    size_t next = out.find(line, at);
    ASSERT_NE(next, std::string::npos) << line << " after offset " << at << " in:\n" << out;
    at = next;
  }
  Csv c = read_csv(csv);
  ASSERT_FALSE(c.header.empty()) << csv;
  auto& col = c.col;
  const auto& rows = c.rows;
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_EQ(r[col["repeat"]], "3");
    double sps = std::stod(r[col["steps_per_s"]]);
    EXPECT_LE(std::stod(r[col["steps_per_s_min"]]), sps);
    EXPECT_GE(std::stod(r[col["steps_per_s_max"]]), sps);
    EXPECT_GT(std::stod(r[col["speedup_vs_eager"]]), 0.0);
  }
  EXPECT_EQ(rows[0][col["speedup_vs_eager"]], "1");
  EXPECT_EQ(rows[0][col["loss_check"]], "ref");
  EXPECT_EQ(rows[1][col["loss_check"]], "exact");
}

// Without --csv the table is the report (what a user running the installed `terra-bench --quick`
// sees); --plots without --csv has nothing to draw from and is a usage error.
TEST(TerraBench, RunsWithoutCsvAndPrintsTheTable) {
  std::string bin = bench_binary();
  if (bin.empty()) GTEST_SKIP() << "terra-bench not built next to terra_tests";
  std::string out;
  int code = run("'" + bin + "' --programs dcgan --modes eager,coexec --steps 3 --warmup 0 --repeat 1 --quick --timeout 120",
                 &out);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("[2/2] dcgan coexec"), std::string::npos) << out;
  EXPECT_NE(out.find("exact"), std::string::npos) << out;
  EXPECT_EQ(out.find("CSV:"), std::string::npos) << out;
  code = run("'" + bin + "' --programs dcgan --quick --plots /tmp/never_written", &out);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--plots DIR needs --csv FILE"), std::string::npos) << out;
}

// --quick alone measures enough steps to resolve a ratio (200 steps, 20 warm-up, 3 rounds); each of
// them may still be given, and a given --steps keeps the usual warm-up (a quarter, at most 5).
TEST(TerraBench, QuickDefaultsToEnoughStepsToMeasure) {
  std::string bin = bench_binary();
  if (bin.empty()) GTEST_SKIP() << "terra-bench not built next to terra_tests";
  std::string out;
  ASSERT_EQ(run("'" + bin + "' --programs dcgan --modes eager --quick --timeout 120", &out), 0) << out;
  EXPECT_NE(out.find("200 steps (20 warm-up)"), std::string::npos) << out;
  EXPECT_NE(out.find("3 timed repetitions"), std::string::npos) << out;
  EXPECT_NE(out.find("[3/3] dcgan eager round 3/3"), std::string::npos) << out;
  ASSERT_EQ(run("'" + bin + "' --programs dcgan --modes eager --quick --steps 8 --timeout 120", &out), 0) << out;
  EXPECT_NE(out.find("8 steps (2 warm-up)"), std::string::npos) << out;
  ASSERT_EQ(run("'" + bin + "' --programs dcgan --modes eager --steps 8 --timeout 120", &out), 0) << out;
  EXPECT_NE(out.find("8 steps (2 warm-up)"), std::string::npos) << out;
  EXPECT_NE(out.find("1 timed repetition\n"), std::string::npos) << out;
}

TEST(TerraBench, RejectsUnknownProgram) {
  std::string bin = bench_binary();
  if (bin.empty()) GTEST_SKIP() << "terra-bench not built next to terra_tests";
  std::string out;
  EXPECT_EQ(run("'" + bin + "' --programs nosuch --csv /dev/null", &out), 2);
  EXPECT_NE(out.find("unknown program 'nosuch'"), std::string::npos) << out;
}

}  // namespace
