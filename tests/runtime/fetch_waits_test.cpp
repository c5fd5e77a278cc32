// A fetch in co-execution waits only for the value it reads, not for every op validated before
// it: `loss.item()` after backward and the optimizer's step (inside the step), or a trainer object
// reducing and fetching the loss it kept (between steps, as music_transformer does). The host goes
// on while the runner still computes the backward pass and the update. Reads must still see every
// write made before them: an in-place write later in the step, through a view too, and the
// optimizer's update of a parameter.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <terra/terra.h>

#include "mode_harness.h"

using namespace terra;
namespace F = terra::nn::functional;

namespace {

// Heavy enough that the runner is still busy when the host leaves the step.
Tensor busy_work(const Tensor& w) {
  Tensor a = w;
  for (int i = 0; i < 6; ++i) a = F::tanh(matmul(a, w) * 0.01);
  return a;
}

// A classifier's loss (set in `loss` before anything can fail), then an op the loss does not
// depend on that fails in the graph when `fail` (a class index out of range, computed there) after
// work that keeps the runner busy. Eager raises at that op.
void loss_before_a_failing_op(nn::Linear& fc, const Tensor& w, bool fail, Tensor& loss) {
  const Tensor y = tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1}, {6});
  loss = F::cross_entropy(fc(randn({6, 32})), y);
  Tensor shift = tensor(std::vector<int64_t>{0, 0, 0, 0, 0, fail ? 9 : 0}, {6});
  Tensor late = busy_work(w).slice(1, 0, 4).slice(0, 0, 6);
  F::cross_entropy(late, y + shift);
}

// engine.synchronize(), its error (if any) noted with the others.
void synchronize_noting(Engine& eng, std::vector<std::string>& errors) {
  try {
    eng.synchronize();
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
}

using Program = std::function<void(Engine&, const std::function<void(const Tensor&)>&)>;

// Every value the program observed, bit for bit, in co-execution and lazy mode as in eager.
void expect_graph_modes_match_eager(const Program& program, uint64_t seed) {
  auto eager = terra::testing::run_in_mode(Mode::Eager, program, seed);
  for (Mode m : {Mode::CoExecution, Mode::Lazy})
    terra::testing::expect_same(eager, terra::testing::run_in_mode(m, program, seed), mode_name(m));
}

}  // namespace

TEST(FetchWaits, SeeInPlaceWritesMadeLaterInTheStep) {
  auto program = [](Engine& eng, const std::function<void(const Tensor&)>& observe) {
    nn::Linear fc(64, 64);
    optim::SGD opt(fc.parameters(), 0.05, 0.9);
    Tensor x = randn({64, 64});
    for (int s = 0; s < 8; ++s) {
      Tensor early, viewed, kept;
      {
        auto st = eng.step();
        early = fc(x).detach() * 2;      // produced first...
        viewed = fc(x).detach() + 1;
        Tensor loss = busy_work(fc(x)).sum();
        opt.zero_grad();
        loss.backward();
        opt.step();
        early.add_(loss.detach());       // ...written in place at the step's end
        viewed.reshape({4096}).mul_(3);  // through a view
        kept = loss.detach();
      }
      // Outside the step: eager ops and fetches on the step's values and on the parameters.
      observe(early.sum());
      observe(viewed.mean());
      observe(fc.parameters()[0].sum());
      observe(kept);
    }
  };
  expect_graph_modes_match_eager(program, 11);
}

// The loss is fetched after a step whose later op failed in the graph: the fetch returns eager's
// value (it does not depend on the failed op), and the error reaches the program exactly once —
// at the step's end or at synchronize(), never at that fetch.
TEST(FetchWaits, AFetchOfAnIndependentValueDoesNotRaiseTheStepsError) {
  auto program = [](Mode m, std::vector<float>& fetched, std::vector<std::string>& errors, int& fetch_errors) {
    manual_seed(5);
    nn::Linear fc(32, 4);
    Tensor w = randn({128, 128});
    Engine eng(m);
    for (int s = 0; s < 8; ++s) {
      Tensor loss;
      try {
        auto st = eng.step();
        loss_before_a_failing_op(fc, w, s == 5, loss);
      } catch (const std::exception& e) {
        errors.push_back(e.what());
      }
      try {
        fetched.push_back(loss.mean().item<float>());
      } catch (const std::exception& e) {
        fetch_errors++;
        errors.push_back(e.what());
      }
    }
    synchronize_noting(eng, errors);
  };
  std::vector<float> eager_fetched;
  std::vector<std::string> eager_errors;
  int eager_fetch_errors = 0;
  program(Mode::Eager, eager_fetched, eager_errors, eager_fetch_errors);
  ASSERT_EQ(eager_errors.size(), 1u);
  ASSERT_EQ(eager_fetched.size(), 8u);
  for (Mode m : {Mode::CoExecution, Mode::Lazy}) {
    std::vector<float> fetched;
    std::vector<std::string> errors;
    int fetch_errors = 0;
    program(m, fetched, errors, fetch_errors);
    EXPECT_EQ(fetch_errors, 0) << mode_name(m) << ": " << (errors.empty() ? "" : errors.back());
    ASSERT_EQ(errors.size(), 1u) << mode_name(m) << ": raised once";
    EXPECT_EQ(errors[0].rfind(eager_errors[0], 0), 0u) << mode_name(m) << ": " << errors[0];
    EXPECT_EQ(fetched, eager_fetched) << mode_name(m);
  }
}

// Inside the step: the same reads, fetched before the step ends.
TEST(FetchWaits, InStepFetchesSeeInPlaceWritesMadeAfterTheValuesOp) {
  auto program = [](Engine& eng, const std::function<void(const Tensor&)>& observe) {
    nn::Linear fc(64, 64);
    optim::Adam opt(fc.parameters(), 1e-2);
    Tensor x = randn({64, 64});
    for (int s = 0; s < 8; ++s) {
      auto st = eng.step();
      Tensor early = fc(x).detach() * 2;
      Tensor viewed = fc(x).detach() + 1;
      Tensor loss = busy_work(fc(x)).sum();
      opt.zero_grad();
      loss.backward();
      opt.step();
      early.add_(loss.detach());
      viewed.reshape({4096}).mul_(3);
      observe(early);
      observe(viewed);
      observe(fc.parameters()[0]);
      observe(loss);
    }
  };
  expect_graph_modes_match_eager(program, 12);
}

// Inside the step, the loss is fetched after an op that failed in the graph and that the loss does
// not depend on: the fetch returns the loss (eager raised at the failing op, before its fetch), and
// the error reaches the program once, at the step's end or later.
TEST(FetchWaits, AnInStepFetchOfAnIndependentValueDoesNotRaiseALaterOpsError) {
  auto program = [](Mode m, std::vector<float>& fetched, std::vector<std::string>& errors) {
    manual_seed(6);
    nn::Linear fc(32, 4);
    Tensor w = randn({128, 128});
    Engine eng(m);
    for (int s = 0; s < 8; ++s) {
      bool fetching = false;
      try {
        auto st = eng.step();
        Tensor loss;
        loss_before_a_failing_op(fc, w, s == 5, loss);
        fetching = true;
        fetched.push_back(loss.item<float>());
        fetching = false;
      } catch (const std::exception& e) {
        errors.push_back(std::string(fetching ? "at the fetch: " : "") + e.what());
      }
    }
    synchronize_noting(eng, errors);
  };
  std::vector<float> eager_fetched;
  std::vector<std::string> eager_errors;
  program(Mode::Eager, eager_fetched, eager_errors);
  ASSERT_EQ(eager_errors.size(), 1u);
  ASSERT_EQ(eager_fetched.size(), 7u);  // eager never reached step 5's fetch
  for (Mode m : {Mode::CoExecution, Mode::Lazy}) {
    std::vector<float> fetched;
    std::vector<std::string> errors;
    program(m, fetched, errors);
    ASSERT_EQ(errors.size(), 1u) << mode_name(m) << ": raised once";
    // Lazy's fetch is a barrier: it runs the failing op and raises there, as eager's op did.
    const std::string at_fetch = "at the fetch: ";
    const bool raised_at_fetch = errors[0].rfind(at_fetch, 0) == 0;
    EXPECT_EQ(raised_at_fetch, m == Mode::Lazy) << mode_name(m) << ": " << errors[0];
    const std::string what = raised_at_fetch ? errors[0].substr(at_fetch.size()) : errors[0];
    EXPECT_EQ(what.rfind(eager_errors[0], 0), 0u) << mode_name(m) << ": " << what;
    if (m == Mode::CoExecution) {
      ASSERT_EQ(fetched.size(), 8u) << mode_name(m);
      fetched.erase(fetched.begin() + 5);
    }
    EXPECT_EQ(fetched, eager_fetched) << mode_name(m);
  }
}

// A value the host already read (materialized: it now points at the runner's storage), then
// wrote in place later in the step, directly (its storage carries the write's mark) or through
// aliases taken before the read (a detach, a view: they still hold the placeholder's storage
// object). Later reads, in and after the step, see the write. Each program makes no other
// in-place write into a step's value, so each mechanism is checked alone.
Program write_after_read(bool through_aliases) {
  return [through_aliases](Engine& eng, const std::function<void(const Tensor&)>& observe) {
    nn::Linear fc(64, 64);
    optim::SGD opt(fc.parameters(), 0.05);
    Tensor x = randn({64, 64});
    for (int s = 0; s < 8; ++s) {
      Tensor value;
      {
        auto st = eng.step();
        value = fc(x).detach() * 3;
        Tensor alias = value.detach();
        Tensor view = value.reshape({4096});
        observe(value);  // materialized here
        Tensor loss = busy_work(fc(x)).sum();
        opt.zero_grad();
        loss.backward();
        opt.step();
        if (through_aliases) {
          alias.add_(loss.detach());
          view.mul_(2);
        } else {
          value.add_(loss.detach());
        }
        observe(value);
      }
      observe(value.sum());
      observe(value);
    }
  };
}

TEST(FetchWaits, ReadsSeeAWriteIntoAValueAlreadyRead) { expect_graph_modes_match_eager(write_after_read(false), 13); }

TEST(FetchWaits, ReadsSeeAWriteThroughAnAliasMadeBeforeTheValueWasRead) {
  expect_graph_modes_match_eager(write_after_read(true), 14);
}
