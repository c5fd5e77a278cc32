// Reads between steps (a trainer object reducing and fetching the loss it kept, as
// music_transformer does) wait only for the values they read, not for the whole step: the host
// goes on while the runner still runs the backward pass. They must still see every write the step
// made: an in-place write later in the step, through a view too, and the optimizer's update.
#include <gtest/gtest.h>

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

}  // namespace

TEST(AfterStepReads, SeeInPlaceWritesMadeLaterInTheStep) {
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
  auto eager = terra::testing::run_in_mode(Mode::Eager, program, 11);
  for (Mode m : {Mode::CoExecution, Mode::Lazy}) {
    auto other = terra::testing::run_in_mode(m, program, 11);
    terra::testing::expect_same(eager, other, mode_name(m));
  }
}

// The loss is fetched after a step whose later op failed in the graph: the fetch returns eager's
// value (it does not depend on the failed op), and the error reaches the program exactly once —
// at the step's end or at synchronize(), never at that fetch.
TEST(AfterStepReads, AFetchOfAnIndependentValueDoesNotRaiseTheStepsError) {
  auto program = [](Mode m, std::vector<float>& fetched, std::vector<std::string>& errors, int& fetch_errors) {
    manual_seed(5);
    nn::Linear fc(32, 4);
    Tensor w = randn({128, 128});
    Engine eng(m);
    for (int s = 0; s < 8; ++s) {
      Tensor loss;
      try {
        auto st = eng.step();
        Tensor x = randn({6, 32});
        loss = F::cross_entropy(fc(x), tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1}, {6}));
        Tensor shift = tensor(std::vector<int64_t>{0, 0, 0, 0, 0, s == 5 ? 9 : 0}, {6});
        Tensor late = busy_work(w).slice(1, 0, 4).slice(0, 0, 6);  // the runner is busy here
        Tensor bad = F::cross_entropy(late, tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1}, {6}) + shift);
        (void)bad;
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
    try {
      eng.synchronize();
    } catch (const std::exception& e) {
      errors.push_back(e.what());
    }
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
