// The bad-input table (bad_input_table.h) run in Eager, Lazy and CoExecution. Each case runs inside
// a small training program: 3 good steps (so co-execution has its graph and the bad call hits the
// skeleton), a step containing the bad call (try/catch around the step), 2 more good steps. Each
// mode runs all cases in a child process (this binary re-executed), one case after another; a crash
// or a hang costs that case only (the parent restarts the child after it). The parent compares every
// mode with eager: the same exception type, a message starting with "[op]", raised at the call (all
// inputs are host-fed), or the same values; and the parameters bit-identical to eager's afterwards.
#include <cxxabi.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <typeinfo>

#include "runtime/bad_input_table.h"
#include "runtime/child_process.h"

namespace terra::testing {
namespace {

constexpr const char* kEnv = "TERRA_BAD_INPUT_CHILD";
constexpr double kCaseTimeoutS = 8.0;  // a case not finished by then counts as a hang
constexpr int kMaxHangsPerMode = 4;     // then the mode's remaining cases are not run (and fail)
constexpr int kGoodBefore = 3, kGoodAfter = 2;

std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\t' || ch == '\r') ch = ' ';
  return s;
}

std::string type_name(const std::exception& e) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? d.get() : typeid(e).name();
}

uint64_t fnv(uint64_t h, uint64_t x) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((x >> (8 * i)) & 0xff)) * 1099511628211ull;
  return h;
}
uint64_t hash_values(const std::vector<double>& v, uint64_t h = 1469598103934665603ull) {
  for (double d : v) {
    uint64_t bits;
    if (std::isnan(d)) d = std::numeric_limits<double>::quiet_NaN();  // any NaN matches any NaN
    std::memcpy(&bits, &d, 8);
    h = fnv(h, bits);
  }
  return h;
}

// "float32 [2, 3] <hash>": what the bad call returned.
std::string describe(const Tensor& r) {
  std::vector<double> v = r.to_vector<double>();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)hash_values(v));
  return std::string(dtype_name(r.dtype())) + " " + shape_str(r.shape()) + " " + buf;
}

struct Outcome {
  bool raised = false;
  std::string where, type, msg;  // where: call | fetch | step-end (where the bad step's exception surfaced)
  std::string values;            // describe() of the result when nothing was raised
  std::string state;             // "params <hash>" or "error: ..." (a good step or the final read failed)
  std::string graph;             // co-execution: "graph" if a symbolic graph existed when the bad step began
};

// The training program around one case, in one mode.
Outcome run_case(const BadCase& c, Mode mode) {
  manual_seed(11);
  Outcome o;
  std::string state_error;
  std::vector<float> xv(20), yv(15);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i % 7) - 3) * 0.3f;
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = float(int(i % 5) - 2) * 0.2f;
  Engine engine(mode);
  nn::Linear lin(4, 3);
  optim::SGD opt(lin.parameters(), 0.1, 0.9);
  for (int s = 0; s < kGoodBefore + 1 + kGoodAfter; ++s) {
    const bool bad = s == kGoodBefore;
    const char* phase = "call";
    auto record = [&](const std::string& type, const std::string& msg) {
      if (bad && !o.raised) {
        o.raised = true;
        o.where = phase;
        o.type = type;
        o.msg = one_line(msg);
      } else if (state_error.empty()) {
        state_error = "error: step " + std::to_string(s) + " threw " + type + ": " + one_line(msg);
      }
    };
    if (bad && mode == Mode::CoExecution && engine.stats().graph_generations > 0) o.graph = "graph";
    try {
      Step step = engine.step();
      opt.zero_grad();
      Tensor loss = mse_loss(lin(tensor(xv, {5, 4})), tensor(yv, {5, 3}));
      loss.backward();
      if (bad) {
        Tensor r = c.call();
        phase = "fetch";
        if (r.defined()) o.values = describe(r);
        phase = "step-end";
      }
      opt.step();
      step.end();
    } catch (const std::exception& e) {
      record(type_name(e), e.what());
    } catch (...) {
      record("non-std exception", "");
    }
  }
  try {
    engine.synchronize();
    uint64_t h = 1469598103934665603ull;
    for (const Tensor& p : lin.parameters()) h = hash_values(p.to_vector<double>(), h);
    char buf[40];
    std::snprintf(buf, sizeof buf, "params %016llx", (unsigned long long)h);
    if (state_error.empty()) o.state = buf;
  } catch (const std::exception& e) {
    if (state_error.empty()) state_error = "error: final read threw " + type_name(e) + ": " + one_line(e.what());
  }
  if (!state_error.empty()) o.state = state_error;
  return o;
}

// The child: runs cases [start, end) in the mode of TERRA_BAD_INPUT_CHILD="<mode>:<start>".
TEST(BadInputChild, RunFromEnv) {
  const char* spec = std::getenv(kEnv);
  if (!spec) GTEST_SKIP() << "runs only as the child of BadInputTable.EveryCaseEveryMode";
  std::string s = spec;
  size_t colon = s.find(':');
  Mode mode = parse_mode(s.substr(0, colon));
  const auto& cases = bad_cases();
  for (size_t i = std::stoul(s.substr(colon + 1)); i < cases.size(); ++i) {
    std::printf("@@B\t%zu\n", i);
    std::fflush(stdout);
    Outcome o = run_case(cases[i], mode);
    std::printf("@@R\t%zu\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", i, int(o.raised), o.where.c_str(), o.type.c_str(),
                o.msg.c_str(), o.values.c_str(), o.state.c_str(), o.graph.c_str());
    std::fflush(stdout);
  }
}

struct CaseRun {
  enum Kind { NotRun, Done, Crash, Hang } kind = NotRun;
  Outcome o;
  std::string how;  // crash/hang details
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, '\t');) f.push_back(x);
  while (f.size() < 10) f.push_back("");
  return f;
}

// Runs every case of one mode, restarting the child after a crash or a hang.
std::vector<CaseRun> run_mode(const char* mode, size_t n) {
  std::vector<CaseRun> runs(n);
  size_t next = 0;
  int hangs = 0;
  while (next < n) {
    ChildProcess child("BadInputChild.RunFromEnv", {{kEnv, std::string(mode) + ":" + std::to_string(next)}});
    long current = -1;
    while (auto line = child.read_line(kCaseTimeoutS)) {
      if (line->rfind("@@B\t", 0) == 0) {
        current = std::stol(line->substr(4));
      } else if (line->rfind("@@R\t", 0) == 0) {
        auto f = split_tabs(*line);
        CaseRun& r = runs[std::stoul(f[1])];
        r.kind = CaseRun::Done;
        r.o = Outcome{f[2] == "1", f[3], f[4], f[5], f[6], f[7], f[8]};
        next = std::stoul(f[1]) + 1;
        current = -1;
      }
    }
    if (child.timed_out()) {
      child.kill();
      if (current < 0) current = long(next);  // hung before its first case
      runs[size_t(current)] = CaseRun{CaseRun::Hang, {}, "no result within " + std::to_string(int(kCaseTimeoutS)) + " s"};
      next = size_t(current) + 1;
      if (++hangs >= kMaxHangsPerMode) {
        for (size_t i = next; i < n; ++i) runs[i] = CaseRun{CaseRun::NotRun, {}, "not run: too many hangs in this mode"};
        break;
      }
      continue;
    }
    std::string how = child.wait();
    if (current >= 0) {  // died inside a case
      runs[size_t(current)] = CaseRun{CaseRun::Crash, {}, how + "; output tail: " + one_line(child.tail().substr(
                                                      child.tail().size() > 600 ? child.tail().size() - 600 : 0))};
      next = size_t(current) + 1;
    } else if (next < n) {  // died between cases, or never started: count the next case
      runs[next] = CaseRun{CaseRun::Crash, {}, how + " before the case started: " + one_line(child.tail())};
      ++next;
    } else if (!exited_ok(how) && n > 0) {
      runs[n - 1].how += " [child then ended with " + how + "]";
    }
  }
  return runs;
}

// "[name] ..." -> "name"; "" if the message does not start with a bracketed name.
std::string prefix_of(const std::string& msg) {
  if (msg.empty() || msg[0] != '[') return "";
  size_t e = msg.find(']');
  return e == std::string::npos ? "" : msg.substr(1, e - 1);
}

bool accepted(const BadCase& c, const std::string& prefix) {
  for (const auto& op : c.ops)
    if (op == prefix) return true;
  return false;
}

// What is wrong with one mode's outcome of a case ("" = right).
std::string judge_outcome(const BadCase& c, const Outcome& eager, const Outcome& o, bool is_eager) {
  bool want_error = c.expect == Expect::Error || eager.raised;
  if (!want_error) {
    if (o.raised) return "raised " + o.type + " at " + o.where + " where eager returns values: " + o.msg;
    if (o.values != eager.values) return "values " + o.values + " differ from eager's " + eager.values;
    return "";
  }
  if (!o.raised) return is_eager ? "eager raises nothing (returns " + o.values + ")" : "no exception (eager raises " + eager.type + ")";
  std::string p = prefix_of(o.msg);
  std::string problem;
  // A derived row may compute the offending value inside the graph (x * x as a divisor): the graph
  // modes then raise eager's error at the documented later point (a fetch or the step's end).
  bool in_graph = c.expect == Expect::SameAsEager && !is_eager && o.msg.rfind(eager.msg, 0) == 0;
  if (o.where != "call" && !in_graph) problem += "raised at " + o.where + ", not at the call; ";
  if (!is_eager && o.type != eager.type) problem += "type " + o.type + " but eager raises " + eager.type + "; ";
  if (c.expect == Expect::Error && !accepted(c, p)) problem += "message does not start with [op]; ";
  if (c.expect == Expect::SameAsEager && (p.empty() || (!is_eager && p != prefix_of(eager.msg))))
    problem += "message prefix [" + p + "] differs from eager's; ";
  if (!problem.empty()) problem += "message: " + o.msg;
  return problem;
}

TEST(BadInputTable, EveryCaseEveryMode) {
  const auto& cases = bad_cases();
  const char* modes[] = {"eager", "lazy", "coexec"};
  std::vector<CaseRun> runs[3];
  auto t0 = std::chrono::steady_clock::now();
  {
    std::vector<std::thread> ts;
    for (int m = 0; m < 3; ++m) ts.emplace_back([&, m] { runs[m] = run_mode(modes[m], cases.size()); });
    for (auto& t : ts) t.join();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t total = 0, ok = 0, crashes = 0, hangs = 0, state = 0, wrong = 0;
  std::map<std::string, int64_t> wrong_by_class;
  std::vector<std::string> failures;
  for (size_t i = 0; i < cases.size(); ++i) {
    const BadCase& c = cases[i];
    const CaseRun& eager = runs[0][i];
    for (int m = 0; m < 3; ++m) {
      const CaseRun& r = runs[m][i];
      ++total;
      std::string where = std::string(modes[m]) + " " + c.name + " (" + c.cls + "): ";
      if (r.kind == CaseRun::Crash) ++crashes, failures.push_back(where + "CRASH " + r.how);
      if (r.kind == CaseRun::Hang || r.kind == CaseRun::NotRun) ++hangs, failures.push_back(where + "HANG " + r.how);
      if (r.kind != CaseRun::Done) continue;
      if (eager.kind != CaseRun::Done) {
        ++wrong, failures.push_back(where + "no eager result to compare with");
        continue;
      }
      std::string bad = judge_outcome(c, eager.o, r.o, m == 0);
      if (m == 2 && r.o.graph.empty()) bad += "(the good steps built no symbolic graph: the bad call missed the skeleton) ";
      std::string bad_state;
      if (r.o.state.rfind("params ", 0) != 0) bad_state = r.o.state;
      else if (r.o.state != eager.o.state) bad_state = "parameters differ from eager's after the program";
      if (!bad.empty()) ++wrong, ++wrong_by_class[c.cls], failures.push_back(where + bad);
      if (!bad_state.empty()) ++state, failures.push_back(where + "STATE " + bad_state);
      if (bad.empty() && bad_state.empty()) ++ok;
    }
  }
  for (const auto& f : failures) std::printf("  FAIL %s\n", f.c_str());
  std::string by_class;
  for (const auto& [k, v] : wrong_by_class) by_class += " " + k + ":" + std::to_string(v);
  std::printf("[bad-input table] %zu cases x 3 modes: %lld runs, %lld clear errors/same values, %lld crashes, "
              "%lld hangs, %lld state mismatches, %lld wrong errors/values%s%s (%.1f s)\n",
              cases.size(), (long long)total, (long long)ok, (long long)crashes, (long long)hangs, (long long)state,
              (long long)wrong, by_class.empty() ? "" : " by class:", by_class.c_str(), secs);
  std::fflush(stdout);
  EXPECT_EQ(crashes, 0);
  EXPECT_EQ(hangs, 0);
  EXPECT_EQ(state, 0);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(ok, total);
}

}  // namespace
}  // namespace terra::testing
