// Loops whose trip count changes from step to step (issue #7, defect 6). Found with the Python
// binding: an MLP whose step runs `out = out + relu(out) * 0.1` s / 20 times deadlocked at step 870
// in co-execution. Every new largest trip count adds unrolled nodes to the graph, and with them
// candidates to the phi that picks each optimizer update's gradient; the 257th candidate's index
// did not fit the Validate message's phi byte, so the runner read another candidate (a value that
// never ran) and waited for an abort the host never sent; where that candidate had run, the step
// silently used the wrong gradient (any phi past 256 candidates, e.g. 300 parameters updated in a
// loop). Co-execution runs in a child process under `timeout`, so a hang fails the test instead
// of hanging the run.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>

#include "runtime/mode_harness.h"
#include "terra/runtime/coexec.h"

using namespace terra;
using namespace terra::testing;

namespace {

using Observe = std::function<void(const Tensor&)>;

// Largest number of candidates of any phi input in the session's current symbolic graph.
size_t max_phi_candidates(const Engine& engine) {
  const runtime::CoExecSession* s = engine.coexec();
  if (!s || !s->symbolic_graph()) return 0;
  size_t m = 0;
  std::function<void(const graph::Region&)> walk = [&](const graph::Region& r) {
    for (auto& sw : r.switches)
      for (auto& c : sw.cases)
        for (auto& it : c.block) {
          if (it.is_loop) {
            walk(*it.body);
            continue;
          }
          for (auto& in : it.op.inputs) m = std::max(m, in.candidates.size());
        }
  };
  walk(s->symbolic_graph()->root);
  return m;
}

// optim::SGD's step as it was before its update became one op for all parameters (fused_sgd_),
// kept op for op: a step count, the learning rate made at the first parameter with a gradient,
// then one sgd_param_ call site executed once per parameter. With it the graph of these programs
// passes 256 phi candidates (what the hang needed); a user's own update loop over parameters
// builds the same kind of graph.
struct PerParamSgd {
  std::vector<Tensor> params;
  double lr;
  void zero_grad() {
    for (const Tensor& p : params) p.set_grad(Tensor());
  }
  void step() {
    NoGradGuard ng;
    count.add_(1.0);
    Tensor l;
    for (const Tensor& p : params) {
      const Tensor& g = p.grad();
      if (!g.defined()) continue;
      if (!l.defined()) l = scalar_tensor(lr, DType::Float64);
      sgd_param_(p, l, g);
    }
  }
  Tensor count = zeros({}, DType::Float64);
};

// The reported pattern: 3-layer MLP, a loop of s / 20 trips, SGD every step, loss.item() every
// 10th step. Observes every fetched loss and, at the end, the parameters.
void mlp_growing_loop(Engine& engine, const Observe& observe, int steps, size_t* max_phi) {
  nn::Sequential model(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 16), nn::ReLU(), nn::Linear(16, 4));
  PerParamSgd opt{model.parameters(), 0.01};
  Tensor x = randn({6, 8}), y = randn({6, 4});
  for (int s = 0; s < steps; ++s) {
    auto step = engine.step();
    // Layer by layer, as the Python binding's Sequential runs it (the reported program): the C++
    // Sequential fuses Linear + ReLU into one op, and that graph never reaches 257 candidates.
    Tensor out = x;
    for (const auto& m : model) out = m->forward(out);
    for (int i = 0; i < s / 20; ++i) out = out + relu(out) * 0.1;
    Tensor loss = nn::functional::mse_loss(out, y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (s % 10 == 0) observe(loss);
  }
  engine.synchronize();
  for (const Tensor& p : model.parameters()) observe(p);
  if (max_phi) *max_phi = max_phi_candidates(engine);
}

constexpr int kMlpSteps = 880;  // the deadlock was at step 870

// Trip counts that go up (often past every count seen so far), down and to 0, an inner loop whose
// count depends on the outer iteration, and fetches inside loops, after them or not at all. The
// host's choices come from `seed` alone, so every mode runs the same program.
void random_trips(Engine& engine, const Observe& observe, uint32_t seed, int steps, size_t* max_phi) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return int(rng() % uint32_t(n)); };
  // Many small parameters: each new unrolled trip count adds one phi candidate per parameter, so
  // the 256 candidates the hang needed come after a few new counts.
  std::vector<Tensor> params;
  for (int k = 0; k < 40; ++k) params.push_back((randn({4}) * 0.2 + 1.0).requires_grad_());
  PerParamSgd opt{params, 0.01};
  Tensor x = randn({3, 4}), y = randn({3, 4});
  int max_outer = 0;
  for (int s = 0; s < steps; ++s) {
    int outer;
    switch (pick(8)) {
      case 0: outer = 0; break;
      case 1:
      case 2: outer = pick(max_outer + 1); break;  // down (or back up)
      default: outer = max_outer + 1; break;       // beyond any count seen before
    }
    max_outer = std::max(max_outer, outer);
    int inner = pick(4) == 0 ? pick(3) : 0;
    int fetch_at = pick(4) == 0 && outer > 0 ? pick(outer) : -1;
    auto step = engine.step();
    Tensor out = x;
    for (const Tensor& w : params) out = tanh(out * w);
    for (int i = 0; i < outer; ++i) {
      out = out + relu(out) * 0.1;
      for (int j = 0; j < inner; ++j) out = out * 0.9 + tanh(out) * 0.05;  // nested
      if (i == fetch_at) observe(out.sum());
    }
    Tensor loss = nn::functional::mse_loss(out, y);
    if (pick(3) == 0) observe(loss);  // a fetch before the update
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (s % 7 == 0) observe(loss);
  }
  engine.synchronize();
  for (const Tensor& p : params) observe(p);
  if (max_phi) *max_phi = max_phi_candidates(engine);
}

// No changing trip counts at all: 300 parameters applied in a loop give the update's gradient
// input one candidate per parameter (the same backward node at 300 ages).
void many_parameters(Engine& engine, const Observe& observe, size_t* max_phi) {
  std::vector<Tensor> params;
  for (int k = 0; k < 300; ++k) params.push_back((randn({4}) * 0.1 + 1.0).requires_grad_());
  optim::SGD opt(params, 0.01);
  Tensor x = randn({2, 4}), y = randn({2, 4});
  for (int s = 0; s < 6; ++s) {
    auto step = engine.step();
    Tensor out = x;
    for (const Tensor& w : params) out = tanh(out * w);
    Tensor loss = nn::functional::mse_loss(out, y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    observe(loss);
  }
  engine.synchronize();
  for (const Tensor& p : params) observe(p);
  if (max_phi) *max_phi = max_phi_candidates(engine);
}

constexpr int kRandomSteps = 64;
constexpr uint32_t kRandomSeeds[] = {1, 3, 12};  // 1 and 12 pass 256 phi candidates

void run_named(const std::string& name, Engine& engine, const Observe& observe, size_t* max_phi) {
  if (name == "mlp") return mlp_growing_loop(engine, observe, kMlpSteps, max_phi);
  if (name == "wide") return many_parameters(engine, observe, max_phi);
  if (name.rfind("random", 0) == 0)
    return random_trips(engine, observe, uint32_t(std::stoul(name.substr(6))), kRandomSteps, max_phi);
  throw std::invalid_argument("no loop-trips program named " + name);
}

// The child: runs TERRA_LOOP_TRIPS_CHILD=name:mode and prints what it observed as hex floats.
TEST(LoopTripsChild, RunFromEnv) {
  const char* spec = std::getenv("TERRA_LOOP_TRIPS_CHILD");
  if (!spec) GTEST_SKIP() << "runs only as the child of the LoopTrips tests";
  std::string s = spec;
  size_t colon = s.find(':');
  size_t max_phi = 0;
  Observed o = run_in_mode(parse_mode(s.substr(colon + 1)), [&](Engine& e, const Observe& obs) {
    run_named(s.substr(0, colon), e, obs, &max_phi);
  });
  std::printf("TERRA_MAX_PHI %zu\n", max_phi);
  for (auto& v : o.values) {
    std::printf("TERRA_OBS");
    for (double d : v) std::printf(" %a", d);
    std::printf("\n");
  }
  std::fflush(stdout);
}

struct ChildRun {
  int exit_code = -1;
  std::string output;
  Observed observed;
  size_t max_phi = 0;
};

ChildRun run_in_child(const std::string& name, const char* mode, int timeout_s) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) throw std::runtime_error("readlink(/proc/self/exe) failed");
  exe[len] = 0;
  std::string cmd = "TERRA_LOOP_TRIPS_CHILD=" + name + ":" + mode + " timeout " + std::to_string(timeout_s) + " '" +
                    exe + "' --gtest_filter=LoopTripsChild.RunFromEnv 2>&1";
  ChildRun c;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) throw std::runtime_error("popen failed");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) c.output.append(buf, n);
  int status = pclose(f);
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::istringstream lines(c.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string tag;
    words >> tag;
    if (tag == "TERRA_MAX_PHI") words >> c.max_phi;
    if (tag != "TERRA_OBS") continue;
    std::vector<double>& v = c.observed.values.emplace_back();
    for (std::string w; words >> w;) v.push_back(std::strtod(w.c_str(), nullptr));
  }
  return c;
}

std::string tail(const std::string& s) { return s.size() > 2000 ? "..." + s.substr(s.size() - 2000) : s; }

// Eager in this process, `mode` in a child; every observation bit for bit. Returns the largest
// phi (co-execution) so tests can check the run reached what the hang needed.
size_t expect_child_matches_eager(const std::string& name, Mode mode) {
  Observed eager = run_in_mode(Mode::Eager, [&](Engine& e, const Observe& obs) { run_named(name, e, obs, nullptr); });
  ChildRun c = run_in_child(name, mode_name(mode), 60);
  EXPECT_EQ(c.exit_code, 0) << name << " in " << mode_name(mode)
                            << (c.exit_code == 124 ? " timed out (deadlock)" : " failed") << ":\n"
                            << tail(c.output);
  if (c.exit_code == 0) expect_same(eager, c.observed, mode_name(mode));
  return c.max_phi;
}

}  // namespace

TEST(LoopTrips, GrowingLoopInMlpMatchesEagerPastStep870) {
  size_t max_phi = expect_child_matches_eager("mlp", Mode::CoExecution);
  // The graph grew past the 256 candidates a one-byte phi index can name (what the hang needed).
  EXPECT_GE(max_phi, 257u);
}

TEST(LoopTrips, RandomTripCountsMatchEager) {
  size_t max_phi = 0;
  for (uint32_t seed : kRandomSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    max_phi = std::max(max_phi, expect_child_matches_eager("random" + std::to_string(seed), Mode::CoExecution));
  }
  EXPECT_GE(max_phi, 257u);
}

TEST(LoopTrips, RandomTripCountsMatchEagerInLazy) {
  expect_child_matches_eager("random" + std::to_string(kRandomSeeds[0]), Mode::Lazy);
}

TEST(LoopTrips, ThreeHundredParametersUpdatedInALoopMatchEager) {
  EXPECT_GE(expect_child_matches_eager("wide", Mode::CoExecution), 300u);
}
