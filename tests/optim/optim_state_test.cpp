// Optimizer state lives in tensors updated by ops, never in host counters: the per-parameter step
// counts are tensors, the factors that depend on them (Adam's bias corrections, SGD's first-step
// dampening) are computed from them in-graph, bit-identical to the former host-double formulas, and
// restoring the state tensors (what rolling back a failed step does) restores the optimizer exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "runtime/mode_harness.h"

using namespace terra;
using namespace terra::testing;

namespace {

// Three parameters of both float dtypes; f(p) = sum(c * (p - t)^2) per parameter. p1 gets no
// gradient on every third step, so its step count falls behind.
struct Problem {
  std::vector<Tensor> params, c, t;
  Problem() {
    const std::vector<Shape> shapes{{4, 3}, {3}, {2}};
    const std::vector<DType> dtypes{DType::Float32, DType::Float32, DType::Float64};
    for (size_t i = 0; i < shapes.size(); ++i) {
      std::vector<double> p, cc, tt;
      for (int64_t k = 0; k < numel_of(shapes[i]); ++k) {
        p.push_back(0.37 * double(k + 1) * (k % 2 ? -1 : 1) + double(i));
        cc.push_back(0.5 + 0.25 * double((k + i) % 4));
        tt.push_back(0.1 * double(k) - 0.3);
      }
      params.push_back(cast(tensor_f64(p, shapes[i]), dtypes[i]).detach().requires_grad_());
      c.push_back(cast(tensor_f64(cc, shapes[i]), dtypes[i]));
      t.push_back(cast(tensor_f64(tt, shapes[i]), dtypes[i]));
    }
  }
  void backward(int step) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (i == 1 && step % 3 == 1) continue;
      Tensor d = params[i] - t[i];
      (c[i] * d * d).sum().backward();
    }
  }
  void zero_grad() {
    for (const Tensor& p : params) p.set_grad(Tensor());
  }
};

// The pre-change Adam step (host step counters, bias corrections as host doubles), kept verbatim
// as the bit-exact reference.
struct OldAdam {
  std::vector<Tensor> params, exp_avg, exp_avg_sq;
  std::vector<int64_t> steps;
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
  OldAdam(std::vector<Tensor> ps, double lr, double b1, double b2, double eps, double wd, bool decoupled)
      : params(std::move(ps)), lr(lr), beta1(b1), beta2(b2), eps(eps), weight_decay(wd), decoupled(decoupled) {
    NoGradGuard ng;
    for (const Tensor& p : params) {
      exp_avg.push_back(zeros_like(p));
      exp_avg_sq.push_back(zeros_like(p));
    }
    steps.assign(params.size(), 0);
  }
  void step() {
    NoGradGuard ng;
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i];
      Tensor g = p.grad();
      if (!g.defined()) continue;
      const double t = double(++steps[i]);
      if (weight_decay != 0.0) {
        if (decoupled) p.mul_(1.0 - lr * weight_decay);
        else g = g + p * weight_decay;
      }
      const Tensor& m = exp_avg[i];
      const Tensor& v = exp_avg_sq[i];
      m.mul_(beta1).add_(g, 1.0 - beta1);
      v.mul_(beta2);
      add_inplace(v, g * (g * (1.0 - beta2)));
      const double bc1 = 1.0 - std::pow(beta1, t);
      const double bc2_sqrt = std::sqrt(1.0 - std::pow(beta2, t));
      Tensor denom = sqrt(v) / bc2_sqrt + eps;
      add_inplace(p, (m / denom) * (-lr / bc1));
    }
  }
};

// The pre-change SGD step with momentum and dampening (host step counters).
struct OldSgd {
  std::vector<Tensor> params, bufs;
  std::vector<int64_t> steps;
  double lr, momentum, dampening, weight_decay;
  OldSgd(std::vector<Tensor> ps, double lr, double mom, double damp, double wd)
      : params(std::move(ps)), lr(lr), momentum(mom), dampening(damp), weight_decay(wd) {
    NoGradGuard ng;
    for (const Tensor& p : params) bufs.push_back(zeros_like(p));
    steps.assign(params.size(), 0);
  }
  void step() {
    NoGradGuard ng;
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i];
      Tensor d = p.grad();
      if (!d.defined()) continue;
      ++steps[i];
      if (weight_decay != 0.0) d = d + p * weight_decay;
      bufs[i].mul_(momentum);
      add_inplace(bufs[i], d * (steps[i] == 1 ? 1.0 : 1.0 - dampening));
      add_inplace(p, bufs[i] * -lr);
    }
  }
};

void expect_bitwise(const std::vector<Tensor>& got, const std::vector<Tensor>& want, int step) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].dtype(), want[i].dtype());
    std::vector<double> g = got[i].to_vector<double>(), w = want[i].to_vector<double>();
    ASSERT_EQ(g.size(), w.size());
    for (size_t k = 0; k < g.size(); ++k)
      ASSERT_EQ(g[k], w[k]) << "step " << step << " parameter " << i << " element " << k;
  }
}

// Runs `steps` steps of the new optimizer and of the old reference on separate copies of Problem.
template <class Old>
void expect_same_as_old(const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make_new,
                        const std::function<Old(std::vector<Tensor>)>& make_old, int steps) {
  Problem a, b;
  auto opt = make_new(a.params);
  Old old = make_old(b.params);
  for (int s = 0; s < steps; ++s) {
    a.zero_grad();
    b.zero_grad();
    a.backward(s);
    b.backward(s);
    opt->step();
    old.step();
    expect_bitwise(a.params, b.params, s);
  }
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace

TEST(OptimState, AdamMatchesTheHostFormulaBitForBit) {
  for (auto [wd, decoupled] : {std::pair{0.0, false}, std::pair{0.05, false}, std::pair{0.01, true}}) {
    SCOPED_TRACE(::testing::Message() << "weight_decay " << wd << (decoupled ? " (AdamW)" : ""));
    auto make_new = [wd, decoupled](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
      if (decoupled) return std::make_unique<optim::AdamW>(std::move(ps), 0.03, std::make_pair(0.8, 0.99), 1e-6, wd);
      return std::make_unique<optim::Adam>(std::move(ps), 0.03, std::make_pair(0.8, 0.99), 1e-6, wd);
    };
    expect_same_as_old<OldAdam>(
        make_new, [wd, decoupled](std::vector<Tensor> ps) { return OldAdam(std::move(ps), 0.03, 0.8, 0.99, 1e-6, wd, decoupled); },
        12);
  }
}

TEST(OptimState, SgdDampeningMatchesTheHostFormulaBitForBit) {
  expect_same_as_old<OldSgd>(
      [](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
        return std::make_unique<optim::SGD>(std::move(ps), 0.05, 0.9, 0.3, 0.01);
      },
      [](std::vector<Tensor> ps) { return OldSgd(std::move(ps), 0.05, 0.9, 0.3, 0.01); }, 10);
}

// A learning rate changed between steps (a schedule) reaches the in-graph step size.
TEST(OptimState, AdamFollowsLearningRateChanges) {
  Problem a, b;
  optim::Adam opt(a.params, 0.1);
  OldAdam old(b.params, 0.1, 0.9, 0.999, 1e-8, 0.0, false);
  for (int s = 0; s < 6; ++s) {
    opt.set_lr(0.1 / double(s + 1));
    old.lr = 0.1 / double(s + 1);
    a.zero_grad();
    b.zero_grad();
    a.backward(s);
    b.backward(s);
    opt.step();
    old.step();
    expect_bitwise(a.params, b.params, s);
  }
}

TEST(OptimState, StepCountsAreTensors) {
  Problem pr;
  optim::Adam adam(pr.params, 0.01);
  ASSERT_EQ(adam.param_step_tensors().size(), 3u);
  for (int s = 0; s < 7; ++s) {
    pr.zero_grad();
    pr.backward(s);
    adam.step();
  }
  // p1 had no gradient on steps 1 and 4.
  EXPECT_EQ(values(adam.step_tensor()), std::vector<double>{7.0});
  EXPECT_EQ(adam.step_count(), 7);
  const std::vector<double> want{7.0, 5.0, 7.0};
  for (size_t i = 0; i < 3; ++i) {
    const Tensor& c = adam.param_step_tensors()[i];
    EXPECT_EQ(c.dim(), 0);
    EXPECT_EQ(c.dtype(), DType::Float64);
    EXPECT_EQ(values(c), std::vector<double>{want[i]}) << "parameter " << i;
    EXPECT_FALSE(c.requires_grad());
  }
  // state(): step count, per-parameter counts, exp_avg x3, exp_avg_sq x3; the counts are the same tensors.
  std::vector<Tensor> st = adam.state();
  ASSERT_EQ(st.size(), 1u + 3u + 6u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(st[1 + i].same(adam.param_step_tensors()[i]));

  Problem pr2;
  optim::SGD damp(pr2.params, 0.05, 0.9, 0.3);
  for (int s = 0; s < 4; ++s) {
    pr2.zero_grad();
    pr2.backward(s);
    damp.step();
  }
  ASSERT_EQ(damp.param_step_tensors().size(), 3u);
  EXPECT_EQ(values(damp.param_step_tensors()[1]), std::vector<double>{3.0});
  EXPECT_EQ(damp.state().size(), 1u + 3u + 3u);
  // Without dampening no value depends on the counts: none are kept.
  optim::SGD plain(pr2.params, 0.05, 0.9);
  EXPECT_TRUE(plain.param_step_tensors().empty());
  EXPECT_EQ(plain.state().size(), 1u + 3u);
}

// Rolling a step back = restoring the values of the parameters and state() tensors. Afterwards the
// optimizer must continue exactly as if the step had never run (a host counter would have advanced).
TEST(OptimState, RestoringStateTensorsUndoesAStep) {
  auto check = [](const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make, int undo_at) {
    Problem a, b;
    auto oa = make(a.params), ob = make(b.params);
    std::vector<Tensor> saved;
    for (int s = 0; s < 8; ++s) {
      if (s == undo_at) {
        // Snapshot, run a step that "fails late", restore.
        {
          NoGradGuard ng;
          for (const Tensor& t : a.params) saved.push_back(t.detach().clone());
          for (const Tensor& t : oa->state()) saved.push_back(t.clone());
        }
        a.zero_grad();
        a.backward(s);
        oa->step();
        NoGradGuard ng;
        std::vector<Tensor> live = a.params;
        for (const Tensor& t : oa->state()) live.push_back(t);
        ASSERT_EQ(live.size(), saved.size());
        for (size_t k = 0; k < live.size(); ++k) copy_inplace(live[k], saved[k]);
      }
      a.zero_grad();
      b.zero_grad();
      a.backward(s);
      b.backward(s);
      oa->step();
      ob->step();
      expect_bitwise(a.params, b.params, s);
    }
  };
  for (int undo_at : {0, 3}) {
    SCOPED_TRACE(::testing::Message() << "undo at step " << undo_at);
    check([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
      return std::make_unique<optim::Adam>(std::move(ps), 0.05, std::make_pair(0.9, 0.999), 1e-8, 0.01);
    }, undo_at);
    check([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
      return std::make_unique<optim::AdamW>(std::move(ps), 0.05);
    }, undo_at);
    check([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
      return std::make_unique<optim::SGD>(std::move(ps), 0.05, 0.9, 0.3);
    }, undo_at);
  }
}

namespace {

Tensor batch(int i) {
  std::vector<float> v(4 * 6);
  for (size_t k = 0; k < v.size(); ++k) v[k] = float(int((k * 7 + size_t(i) * 13) % 11) - 5) / 5.0f;
  return tensor(v, {4, 6});
}
Tensor labels(int i) { return tensor(std::vector<int64_t>{i % 3, (i + 1) % 3, (i + 2) % 3, i % 2}, {4}); }

// A small MLP trained for 10 steps; observes every loss, the final parameters and the counts.
void train(Engine& e, const std::function<void(const Tensor&)>& obs,
           const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make) {
  Tensor w1, b1, w2;
  {
    NoGradGuard g;
    w1 = randn({6, 8}) * 0.3;
    b1 = zeros({8});
    w2 = randn({8, 3}) * 0.3;
  }
  for (Tensor* t : {&w1, &b1, &w2}) t->requires_grad_();
  auto opt = make({w1, b1, w2});
  for (int i = 0; i < 10; ++i) {
    auto step = e.step();
    opt->zero_grad();
    Tensor out = matmul(relu(matmul(batch(i), w1) + b1), w2);
    Tensor loss = cross_entropy(out, labels(i));
    loss.backward();
    // b1 sits out every fourth step: its count falls behind, in every mode alike.
    if (i % 4 == 2) b1.set_grad(Tensor());
    opt->step();
    obs(loss);
  }
  for (const Tensor& t : opt->state()) obs(t);
  for (const Tensor& t : {w1, b1, w2}) obs(t);
}

void expect_modes_equal(const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make,
                        int max_fallbacks = 1) {
  auto program = [&](Engine& e, const std::function<void(const Tensor&)>& obs) { train(e, obs, make); };
  Observed eager = run_in_mode(Mode::Eager, program);
  Observed co = run_in_mode(Mode::CoExecution, program);
  Observed lazy = run_in_mode(Mode::Lazy, program);
  ASSERT_GT(eager.values.size(), 13u);  // losses, state, parameters
  expect_same(eager, co, "coexec");
  expect_same(eager, lazy, "lazy");
  // The count tensors and step scalars are ordinary graph values: most steps co-execute. The step
  // where b1 sits out first is a new path: one fallback at most (none if it was still tracing).
  EXPECT_LE(co.stats.fallbacks, max_fallbacks);
  EXPECT_GT(co.stats.steps - co.stats.traces, 3);
}

}  // namespace

TEST(OptimState, AdamIsBitIdenticalInEveryMode) {
  expect_modes_equal([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::Adam>(std::move(ps), 0.01, std::make_pair(0.9, 0.999), 1e-8, 0.01);
  });
  expect_modes_equal([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::AdamW>(std::move(ps), 0.01);
  });
}

TEST(OptimState, SgdWithDampeningIsBitIdenticalInEveryMode) {
  expect_modes_equal([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::SGD>(std::move(ps), 0.05, 0.9, 0.3, 0.01);
  });
}

// A schedule changing the learning rate every step: it reaches the fused updates as a fed float64
// scalar, not an attribute, so the graph modes keep co-executing and stay bit-identical. A host
// value first seen varying costs co-execution one fallback on each of the two update calls (all
// parameters, and without b1), on top of b1's.
template <class O>
class Scheduled : public O {
 public:
  using O::O;
  void step() override {
    this->set_lr(this->lr() * 0.8);
    O::step();
  }
};

TEST(OptimState, ScheduledLearningRatesAreBitIdenticalInEveryMode) {
  expect_modes_equal([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<Scheduled<optim::SGD>>(std::move(ps), 0.05, 0.9, 0.0, 0.01, true);  // Nesterov
  }, 3);
  expect_modes_equal([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<Scheduled<optim::SGD>>(std::move(ps), 0.05);
  }, 3);
  expect_modes_equal([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<Scheduled<optim::AdamW>>(std::move(ps), 0.01);
  }, 3);
}

namespace {

// The defect of issue #7: a step whose graph fails late (a class index computed in-graph is out of
// range) ends as in eager, so the optimizer must not have counted it. With a host step counter the
// lazy run's Adam diverged from the second step after the error.
void expect_late_error_as_eager(const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make,
                                int bad_step) {
  auto program = [&](Engine& e, const std::function<void(const Tensor&)>& obs) {
    Tensor w1, w2;
    {
      NoGradGuard g;
      w1 = randn({6, 8}) * 0.3;
      w2 = randn({8, 3}) * 0.3;
    }
    w1.requires_grad_();
    w2.requires_grad_();
    auto opt = make({w1, w2});
    int errors = 0;
    for (int i = 0; i < 8; ++i) {
      try {
        auto step = e.step();
        opt->zero_grad();
        Tensor out = matmul(relu(matmul(batch(i), w1)), w2);
        Tensor labels = argmax(out.detach(), 1);
        if (i == bad_step) labels = labels + ones({4}, DType::Int64) * 7.0;  // 7..9: out of range
        Tensor loss = cross_entropy(out, labels);
        loss.backward();
        opt->step();
        obs(loss);
      } catch (const std::invalid_argument& ex) {
        EXPECT_NE(std::string(ex.what()).find("out of range"), std::string::npos) << ex.what();
        ++errors;
      }
    }
    EXPECT_EQ(errors, 1);
    for (const Tensor& t : opt->state()) obs(t);
    obs(w1);
    obs(w2);
  };
  Observed eager = run_in_mode(Mode::Eager, program);
  expect_same(eager, run_in_mode(Mode::CoExecution, program), "coexec");
  expect_same(eager, run_in_mode(Mode::Lazy, program), "lazy");
}

}  // namespace

TEST(OptimState, LateErrorLeavesAdamAsEager) {
  expect_late_error_as_eager([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::Adam>(std::move(ps), 0.01);
  }, 3);
}

// SGD's dampening only depends on the count on a parameter's first step: fail that one.
TEST(OptimState, LateErrorLeavesSgdDampeningAsEager) {
  expect_late_error_as_eager([](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::SGD>(std::move(ps), 0.05, 0.9, 0.3);
  }, 0);
}
