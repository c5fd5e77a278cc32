// Errors computed by the GraphRunner (or a lazy barrier) are never lost and never corrupt state:
// the failing step ends exactly as eager ends it (the ops before the failing one ran, nothing
// after), the original error reaches the program at a later synchronization point, and values
// that depended on the failed op re-raise that same error.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include <terra/terra.h>

using namespace terra;
namespace F = terra::nn::functional;

namespace {

struct ErrRun {
  std::vector<double> fetched;      // values the program fetched, in order
  std::vector<std::string> errors;  // what() of every exception the program caught
  std::vector<float> params;        // parameters after the run
  Stats stats;
};

enum class Opt { SGD, Adam };

// A linear classifier whose target at step `bad` holds a class index computed in the graph
// (y + shift), out of range: its check cannot run on the host in the graph modes.
// `running`: the running-loss pattern (running = running + loss.detach(), fetched every 4th step).
ErrRun late_error(Mode m, Opt which, bool running_loss, int bad = 5, int steps = 12) {
  manual_seed(0);
  nn::Linear fc(8, 4);
  std::unique_ptr<optim::Optimizer> opt;
  if (which == Opt::Adam) opt = std::make_unique<optim::Adam>(fc.parameters(), 0.1);
  else opt = std::make_unique<optim::SGD>(fc.parameters(), 0.1, 0.9);
  ErrRun r;
  {
    Engine eng(m);
    Tensor running = zeros({});
    for (int s = 0; s < steps; ++s) {
      try {
        auto st = eng.step();
        std::vector<float> xs(48);
        for (int i = 0; i < 48; ++i) xs[size_t(i)] = std::sin(float(i + s));
        Tensor x = tensor(xs, {6, 8});
        Tensor y = tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1}, {6});
        Tensor shift = tensor(std::vector<int64_t>{0, 0, 0, 0, 0, s == bad ? 8 : 0}, {6});
        Tensor loss = F::cross_entropy(fc(x), y + shift);
        opt->zero_grad();
        loss.backward();
        opt->step();
        if (running_loss) {
          running = running + loss.detach();
          if (s % 4 == 0) r.fetched.push_back(running.item<float>());
        } else if (s % 4 == 0 || s > bad) {
          r.fetched.push_back(loss.item<float>());
        }
      } catch (const std::exception& e) {
        r.errors.push_back(e.what());
      }
    }
    try {
      eng.synchronize();
    } catch (const std::exception& e) {
      r.errors.push_back(e.what());
    }
    r.stats = eng.stats();
  }
  for (const Tensor& p : fc.parameters())
    for (float v : p.to_vector<float>()) r.params.push_back(v);
  return r;
}

void expect_original_error(const std::string& eager_error, const std::vector<std::string>& errors, const char* mode) {
  ASSERT_FALSE(errors.empty()) << mode << ": the runner's error was lost";
  for (const std::string& e : errors) {
    EXPECT_EQ(e.rfind(eager_error, 0), 0u) << mode << ": expected eager's error '" << eager_error << "', got '" << e
                                           << "'";
    EXPECT_EQ(e.find("vector::"), std::string::npos) << mode << ": internal error leaked: " << e;
  }
}

}  // namespace

TEST(RunnerErrors, LateClassIndexErrorIsRaisedAndStateMatchesEager) {
  ErrRun eager = late_error(Mode::Eager, Opt::SGD, false);
  ASSERT_EQ(eager.errors.size(), 1u);
  EXPECT_EQ(eager.errors[0].rfind("[nll_loss] target 9", 0), 0u) << eager.errors[0];
  for (Mode m : {Mode::CoExecution, Mode::Lazy}) {
    ErrRun r = late_error(m, Opt::SGD, false);
    expect_original_error(eager.errors[0], r.errors, mode_name(m));
    EXPECT_EQ(r.errors.size(), 1u) << mode_name(m) << ": raised once";
    EXPECT_EQ(r.params, eager.params) << mode_name(m);
    // Fetches after the failed step see exactly eager's values (steps 0, 4 and every one after 5
    // except the failed one's, which eager never fetched either).
    EXPECT_EQ(r.fetched, eager.fetched) << mode_name(m);
  }
}

TEST(RunnerErrors, AdamAfterALateErrorStaysBitIdentical) {
  ErrRun eager = late_error(Mode::Eager, Opt::Adam, false);
  ASSERT_EQ(eager.errors.size(), 1u);
  for (Mode m : {Mode::CoExecution, Mode::Lazy}) {
    ErrRun r = late_error(m, Opt::Adam, false);
    expect_original_error(eager.errors[0], r.errors, mode_name(m));
    EXPECT_EQ(r.fetched, eager.fetched) << mode_name(m) << ": Adam's step counter must roll back with the variables";
    EXPECT_EQ(r.params, eager.params) << mode_name(m);
  }
}

// The running-loss pattern: the host's `running` depends on the failed op, so every later fetch
// of it re-raises the original error (never an internal one); the weights keep training as in eager.
TEST(RunnerErrors, ValuesDependingOnAFailedOpReraiseTheSameError) {
  ErrRun eager = late_error(Mode::Eager, Opt::SGD, true);
  ASSERT_EQ(eager.errors.size(), 1u);
  for (Mode m : {Mode::CoExecution, Mode::Lazy}) {
    ErrRun r = late_error(m, Opt::SGD, true);
    expect_original_error(eager.errors[0], r.errors, mode_name(m));
    EXPECT_GE(r.errors.size(), 2u) << mode_name(m) << ": the fetch of `running` at step 8 re-raises";
    EXPECT_EQ(r.params, eager.params) << mode_name(m);
    ASSERT_GE(r.fetched.size(), 2u);
    EXPECT_EQ(r.fetched[0], eager.fetched[0]);
    EXPECT_EQ(r.fetched[1], eager.fetched[1]);
  }
}

// An error no fetch and no step end saw yet reaches the program at synchronize().
TEST(RunnerErrors, SynchronizeRaisesAnUnseenError) {
  for (Mode m : {Mode::CoExecution, Mode::Lazy}) {
    manual_seed(0);
    nn::Linear fc(4, 3);
    Engine eng(m);
    bool raised = false;
    for (int s = 0; s < 6; ++s) {
      try {
        auto st = eng.step();
        Tensor x = ones({2, 4});
        Tensor y = tensor(std::vector<int64_t>{0, 1}, {2}) + tensor(std::vector<int64_t>{0, s == 5 ? 7 : 0}, {2});
        Tensor loss = F::cross_entropy(fc(x), y);
        loss.backward();
      } catch (const std::invalid_argument&) {
        raised = true;
      }
    }
    if (!raised) EXPECT_THROW(eng.synchronize(), std::invalid_argument) << mode_name(m);
    EXPECT_NO_THROW(eng.synchronize()) << mode_name(m) << ": raised once";
    // The engine stays usable.
    auto st = eng.step();
    Tensor z = (ones({2}) * 3).sum();
    EXPECT_EQ(z.item<float>(), 6.0f);
  }
}

// --- lifetimes (defect 3) ------------------------------------------------------------------

// Engines made and dropped out of order (Python's `eng = terra.Engine(...)` in a loop makes the
// new engine before the old one dies): eager ops between them must not use a dead executor.
TEST(EngineLifetime, EnginesReplacedInALoop) {
  for (Mode m : {Mode::CoExecution, Mode::Lazy, Mode::Eager}) {
    std::unique_ptr<Engine> prev;
    for (int i = 0; i < 4; ++i) {
      auto e = std::make_unique<Engine>(m);
      prev = std::move(e);  // the old engine dies after the new one was made
      EXPECT_EQ((ones({2}) * 2).to_vector<float>(), (std::vector<float>{2, 2})) << mode_name(m);
    }
  }
}

// Destroying an Engine while one of its steps is alive: the step keeps what it needs, ends
// normally, and its values are eager's.
TEST(EngineLifetime, EngineDestroyedWhileAStepIsAlive) {
  auto program = [](Mode m) {
    manual_seed(0);
    nn::Linear fc(4, 2);
    optim::SGD opt(fc.parameters(), 0.1);
    auto eng = std::make_unique<Engine>(m);
    std::vector<float> out;
    for (int s = 0; s < 5; ++s) {
      std::optional<Step> st;
      st.emplace(eng->step());
      Tensor loss = (fc(ones({3, 4}) * float(s)) * 0.5).sum();
      opt.zero_grad();
      loss.backward();
      opt.step();
      if (s == 4) eng.reset();  // the engine goes away mid-step
      out.push_back(loss.item<float>());
      st.reset();
    }
    for (const Tensor& p : fc.parameters())
      for (float v : p.to_vector<float>()) out.push_back(v);
    return out;
  };
  std::vector<float> eager = program(Mode::Eager);
  EXPECT_EQ(program(Mode::CoExecution), eager);
  EXPECT_EQ(program(Mode::Lazy), eager);
}

// Steps of two engines interleaved (not nested): each ends cleanly and eager ops work afterwards.
TEST(EngineLifetime, InterleavedStepsOfTwoEngines) {
  for (Mode m : {Mode::CoExecution, Mode::Lazy}) {
    Engine a(m), b(m);
    for (int s = 0; s < 4; ++s) {
      std::optional<Step> sa, sb;
      sa.emplace(a.step());
      Tensor x = ones({2}) * float(s);
      sb.emplace(b.step());
      Tensor y = ones({2}) * 2.0;
      sa.reset();  // a's step ends first
      EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 2}));
      sb.reset();
      EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{float(s), float(s)}));
    }
    EXPECT_EQ((ones({2}) + 1).to_vector<float>(), (std::vector<float>{2, 2}));
  }
}

// Random numbers after a late error: the host reserved numbers for the random ops it recorded past
// the failed op; eager never drew them, so the generator goes back and later masks match eager's.
TEST(RunnerErrors, RandomOpsAfterALateErrorDrawEagersNumbers) {
  auto program = [](Mode m) {
    manual_seed(7);
    nn::Linear fc(4, 3);
    optim::SGD opt(fc.parameters(), 0.1);  // zero_grad: grads set past the failed op are dropped
    std::vector<std::string> errors;
    std::vector<float> masks;
    Engine eng(m);
    for (int s = 0; s < 8; ++s) {
      try {
        auto st = eng.step();
        Tensor y = tensor(std::vector<int64_t>{0, 1}, {2}) + tensor(std::vector<int64_t>{0, s == 5 ? 7 : 0}, {2});
        Tensor loss = F::cross_entropy(fc(ones({2, 4})), y);
        opt.zero_grad();
        loss.backward();
        opt.step();
        Tensor mask = F::dropout(ones({16}), 0.5, true);  // recorded past the failing op at step 5
        for (float v : mask.to_vector<float>()) masks.push_back(v);
      } catch (const std::exception& e) {
        errors.push_back(e.what());
      }
    }
    return std::make_pair(errors, masks);
  };
  auto eager = program(Mode::Eager);
  ASSERT_EQ(eager.first.size(), 1u);
  for (Mode m : {Mode::CoExecution, Mode::Lazy}) {
    auto r = program(m);
    ASSERT_EQ(r.first.size(), 1u) << mode_name(m) << ": " << (r.first.empty() ? "" : r.first.back());
    EXPECT_EQ(r.first[0].rfind(eager.first[0], 0), 0u) << mode_name(m) << ": " << r.first[0];
    EXPECT_EQ(r.second, eager.second) << mode_name(m) << ": dropout masks after the error differ from eager's";
  }
}
