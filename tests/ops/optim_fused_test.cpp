// The fused optimizer ops (adam_exp_avg_, adam_exp_avg_sq_, adam_param_, sgd_momentum_, sgd_param_)
// against the op chains optim::Adam and optim::SGD ran before them, bit for bit: shapes from empty
// and 0-d to above the parallel grain, float32 and float64, strided operands, every option. The
// reference chains below are optim/adam.cpp's and optim/sgd.cpp's step bodies as they were.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <terra/terra.h>

namespace terra {
namespace {

// ---- the old chains, verbatim ----

void old_adam(const Tensor& p, Tensor g, const Tensor& m, const Tensor& v, const Tensor& t, const Tensor& lr,
              double lr_, double beta1, double beta2, double eps, double weight_decay, bool decoupled) {
  NoGradGuard ng;
  if (weight_decay != 0.0) {
    if (decoupled) p.mul_(1.0 - lr_ * weight_decay);
    else g = g + p * weight_decay;
  }
  m.mul_(beta1).add_(g, 1.0 - beta1);
  v.mul_(beta2);
  add_inplace(v, g * (g * (1.0 - beta2)));
  std::vector<Tensor> sc = adam_step_scalars(t, lr, beta1, beta2, p.dtype());
  Tensor denom = sqrt(v) / sc[0] + eps;
  add_inplace(p, (m / denom) * sc[1]);
}

// `t`: the parameter's step count (read only when dampening != 0).
void old_sgd(const Tensor& p, Tensor d, const Tensor& buf, const Tensor& t, double lr_, double momentum,
             double dampening, double weight_decay, bool nesterov) {
  NoGradGuard ng;
  if (weight_decay != 0.0) d = d + p * weight_decay;
  if (momentum != 0.0) {
    buf.mul_(momentum);
    if (dampening == 0.0) buf.add_(d);
    else add_inplace(buf, d * sgd_dampening_factor(t, dampening, d.dtype()));
    d = nesterov ? d + buf * momentum : buf;
  }
  add_inplace(p, d * -lr_);
}

// ---- operands ----

enum Layout { kDense, kTransposed, kStepped, kExpanded };
const char* layout_name(Layout l) {
  const char* n[] = {"dense", "transposed", "stepped", "expanded"};
  return n[l];
}

// A fresh tensor holding `values` (contiguous) in the asked layout: a transposed view (2-d), every
// other element of a wider base, or a stride-0 broadcast of its first row (values must repeat).
Tensor laid_out(const Tensor& values, Layout l) {
  NoGradGuard ng;
  const Shape& s = values.shape();
  if (l == kTransposed && s.size() == 2) {
    Tensor base = zeros({s[1], s[0]}, values.dtype());
    base.t().copy_(values);
    return base.t();
  }
  if (l == kStepped && !s.empty()) {
    Shape wide = s;
    wide.back() *= 2;
    Tensor view = zeros(wide, values.dtype()).slice(int64_t(s.size()) - 1, 0, wide.back(), 2);
    view.copy_(values);
    return view;
  }
  if (l == kExpanded && s.size() >= 1 && s[0] > 0) {
    return values.slice(0, 0, 1).clone().expand(s);
  }
  return values.clone();
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  auto raw = [](const auto& v) {
    std::vector<uint8_t> b(v.size() * sizeof(v[0]));
    if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  return t.dtype() == DType::Float64 ? raw(t.to_vector<double>()) : raw(t.to_vector<float>());
}
bool same_bits(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && bytes_of(a) == bytes_of(b); }

const std::vector<Shape> kShapes{{}, {0}, {1}, {7}, {33, 17}, {2, 3, 5}, {41000}, {200, 301}};

// Values with the awkward cases mixed in: zeros (sqrt(0) in the denominator), tiny and large
// magnitudes, negative zero.
Tensor values(const Shape& s, DType d, bool nonnegative) {
  NoGradGuard ng;
  Tensor x = randn(s, DType::Float64);
  Tensor pick = rand(s, DType::Float64);
  x = where(lt(pick, 0.05), x * 0.0, x);
  x = where(logical_and(ge(pick, 0.05), lt(pick, 0.1)), x * 1e-20, x);
  x = where(logical_and(ge(pick, 0.1), lt(pick, 0.12)), x * 1e6, x);
  x = where(logical_and(ge(pick, 0.12), lt(pick, 0.13)), x * 0.0 * -1.0, x);
  if (nonnegative) x = abs(x);
  return cast(x, d);
}

struct Operands {
  Tensor p, g, m, v;
};
Operands make_operands(const Shape& s, DType d, Layout lg) {
  Operands o;
  o.p = values(s, d, false);
  o.g = values(s, d, false);
  if (lg == kExpanded && !s.empty() && s[0] > 0) o.g = o.g.slice(0, 0, 1).expand(s).contiguous();
  o.m = values(s, d, false) * 0.1;
  o.v = values(s, d, true) * 0.01;
  return o;
}
// Two independent copies in the asked layouts; state (m, v) laid out like the parameter, as
// zeros_like would not, to cover strided targets too.
std::pair<Operands, Operands> twins(const Operands& o, Layout lp, Layout lg) {
  auto one = [&] { return Operands{laid_out(o.p, lp), laid_out(o.g, lg), laid_out(o.m, lp), laid_out(o.v, lp)}; };
  return {one(), one()};
}

std::string where_(const Shape& s, DType d, Layout lp, Layout lg, const std::string& opts) {
  return shape_str(s) + " " + dtype_name(d) + " param " + layout_name(lp) + " grad " + layout_name(lg) + " " + opts;
}

// Every dtype, shape and parameter/gradient layout the bit-for-bit tests cover (transposes only
// of matrices; large shapes only with one dense operand, to keep them quick).
template <class F>
void for_each_case(F&& f) {
  for (DType d : {DType::Float32, DType::Float64})
    for (const Shape& s : kShapes)
      for (Layout lp : {kDense, kTransposed, kStepped})
        for (Layout lg : {kDense, kTransposed, kStepped, kExpanded}) {
          if (s.size() != 2 && (lp == kTransposed || lg == kTransposed)) continue;
          if (numel_of(s) > 20000 && lp != kDense && lg != kDense) continue;
          f(d, s, lp, lg);
        }
}

TEST(OptimFusedOps, AdamMatchesTheOldChainBitForBit) {
  manual_seed(11);
  int checked = 0;
  for_each_case([&](DType d, const Shape& s, Layout lp, Layout lg) {
          struct Opt { double beta1, beta2, eps, wd; bool decoupled; };
          for (Opt opt : {Opt{0.9, 0.999, 1e-8, 0.0, false}, Opt{0.8, 0.99, 1e-6, 0.05, false},
                          Opt{0.9, 0.999, 1e-8, 0.01, true}, Opt{0.0, 0.5, 0.0, 0.0, false},
                          Opt{0.0, 0.0, 1e-3, 0.3, false}}) {
            Operands o = make_operands(s, d, lg);
            auto [a, b] = twins(o, lp, lg);
            const double lr_ = 0.001 + 0.01 * double(checked % 7);
            Tensor lr = scalar_tensor(lr_, DType::Float64), t = scalar_tensor(double(1 + checked % 13), DType::Float64);
            old_adam(a.p, a.g, a.m, a.v, t, lr, lr_, opt.beta1, opt.beta2, opt.eps, opt.wd, opt.decoupled);
            {
              NoGradGuard ng;
              const bool coupled = opt.wd != 0.0 && !opt.decoupled;
              adam_exp_avg_(b.m, b.g, opt.beta1, coupled ? b.p : Tensor(), opt.wd);
              adam_exp_avg_sq_(b.v, b.g, opt.beta2, coupled ? b.p : Tensor(), opt.wd);
              adam_param_(b.p, b.m, b.v, adam_step_scalars(t, lr, opt.beta1, opt.beta2, d), opt.eps, lr,
                          opt.decoupled ? opt.wd : 0.0);
            }
            // The whole update as one op (its single pass over dense operands, else the three
            // updates): it counts the step itself, so it starts from t - 1.
            Operands c = twins(o, lp, lg).first;
            Tensor tc = scalar_tensor(t.item<double>() - 1.0, DType::Float64);
            {
              NoGradGuard ng;
              fused_adam_({c.p}, {c.g}, {c.m}, {c.v}, {tc}, lr, opt.beta1, opt.beta2, opt.eps, opt.wd, opt.decoupled);
            }
            const std::string at = where_(s, d, lp, lg, "b1 " + std::to_string(opt.beta1) + " wd " +
                                                            std::to_string(opt.wd) + (opt.decoupled ? " AdamW" : ""));
            EXPECT_TRUE(same_bits(a.m, b.m)) << "exp_avg " << at;
            EXPECT_TRUE(same_bits(a.v, b.v)) << "exp_avg_sq " << at;
            EXPECT_TRUE(same_bits(a.p, b.p)) << "param " << at;
            EXPECT_TRUE(same_bits(a.m, c.m)) << "fused_adam_ exp_avg " << at;
            EXPECT_TRUE(same_bits(a.v, c.v)) << "fused_adam_ exp_avg_sq " << at;
            EXPECT_TRUE(same_bits(a.p, c.p)) << "fused_adam_ param " << at;
            EXPECT_EQ(tc.item<double>(), t.item<double>()) << "fused_adam_ count " << at;
            ++checked;
          }
  });
  EXPECT_GT(checked, 300);
}

// One fused_adam_ over many parameters: the dense ones run as one element range split across the
// pool (together above the update grain, each alone below it), the others one by one; every parameter has its
// own step count. Each must equal its own old chain, bit for bit, on one thread and on two.
TEST(OptimFusedOps, AdamOverManyParametersMatchesEachParametersChain) {
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    manual_seed(21);
    const double lr_ = 0.003;
    Tensor lr = scalar_tensor(lr_, DType::Float64);
    std::vector<Tensor> ps, gs, ms, vs, ts, ts_old;
    std::vector<Operands> olds;
    for (int i = 0; i < 40; ++i) {
      const DType d = i % 5 == 3 ? DType::Float64 : DType::Float32;
      const Shape s = i % 3 == 0 ? Shape{256, 33} : i % 3 == 1 ? Shape{8197} : Shape{7, 5};
      const Layout lp = i % 11 == 4 ? kStepped : kDense;
      auto [a, c] = twins(make_operands(s, d, kDense), lp, kDense);
      olds.push_back(a);
      ps.push_back(c.p), gs.push_back(c.g), ms.push_back(c.m), vs.push_back(c.v);
      ts.push_back(scalar_tensor(double(i % 4), DType::Float64));
      ts_old.push_back(scalar_tensor(double(i % 4 + 1), DType::Float64));
    }
    for (bool decoupled : {false, true}) {
      const double wd = decoupled ? 0.01 : 0.02;
      for (size_t i = 0; i < olds.size(); ++i) {
        const Operands& a = olds[i];
        old_adam(a.p, a.g, a.m, a.v, ts_old[i], lr, lr_, 0.9, 0.999, 1e-8, wd, decoupled);
        NoGradGuard ng;
        ts_old[i].add_(1.0);
      }
      {
        NoGradGuard ng;
        fused_adam_(ps, gs, ms, vs, ts, lr, 0.9, 0.999, 1e-8, wd, decoupled);
      }
      for (size_t i = 0; i < olds.size(); ++i) {
        const std::string at = "parameter " + std::to_string(i) + " threads " + std::to_string(threads) +
                               (decoupled ? " AdamW" : " Adam");
        EXPECT_TRUE(same_bits(olds[i].m, ms[i])) << "exp_avg " << at;
        EXPECT_TRUE(same_bits(olds[i].v, vs[i])) << "exp_avg_sq " << at;
        EXPECT_TRUE(same_bits(olds[i].p, ps[i])) << "param " << at;
        EXPECT_EQ(ts[i].item<double>(), ts_old[i].item<double>() - 1.0) << "count " << at;
      }
    }
  }
  set_num_threads(saved);
}

// The same for fused_sgd_: every configuration, the dense parameters as one range, on one thread
// and on two; each parameter equals its own old chain bit for bit.
TEST(OptimFusedOps, SgdOverManyParametersMatchesEachParametersChain) {
  const int saved = num_threads();
  struct Opt { double momentum, dampening, wd; bool nesterov; };
  for (int threads : {1, 2})
    for (Opt opt : {Opt{0.0, 0.0, 0.0, false}, Opt{0.0, 0.0, 0.01, false}, Opt{0.9, 0.0, 0.0, false},
                    Opt{0.9, 0.1, 0.0, false}, Opt{0.5, 0.3, 0.02, false}, Opt{0.9, 0.0, 0.0, true},
                    Opt{0.7, 0.0, 0.05, true}}) {
      set_num_threads(threads);
      manual_seed(23);
      const double lr_ = 0.02;
      const bool has_buf = opt.momentum != 0.0, counted = has_buf && opt.dampening != 0.0;
      std::vector<Tensor> ps, gs, bufs, ts;
      std::vector<Operands> olds;
      std::vector<double> steps;
      for (int i = 0; i < 40; ++i) {
        const DType d = i % 5 == 3 ? DType::Float64 : DType::Float32;
        const Shape s = i % 3 == 0 ? Shape{256, 33} : i % 3 == 1 ? Shape{8197} : Shape{7, 5};
        const Layout lp = i % 11 == 4 ? kStepped : kDense;
        auto [a, c] = twins(make_operands(s, d, kDense), lp, kDense);  // m serves as the momentum buffer
        olds.push_back(a);
        ps.push_back(c.p), gs.push_back(c.g);
        if (has_buf) bufs.push_back(c.m);
        steps.push_back(double(1 + 2 * (i % 2)));  // the first step has no dampening: both kinds
        if (counted) ts.push_back(scalar_tensor(steps.back() - 1.0, DType::Float64));
      }
      for (size_t i = 0; i < olds.size(); ++i)
        old_sgd(olds[i].p, olds[i].g, olds[i].m, scalar_tensor(steps[i], DType::Float64), lr_, opt.momentum,
                opt.dampening, opt.wd, opt.nesterov);
      {
        NoGradGuard ng;
        fused_sgd_(ps, gs, bufs, ts, scalar_tensor(lr_, DType::Float64), opt.momentum, opt.dampening, opt.wd,
                   opt.nesterov);
      }
      for (size_t i = 0; i < olds.size(); ++i) {
        const std::string at = "parameter " + std::to_string(i) + " threads " + std::to_string(threads) +
                               " momentum " + std::to_string(opt.momentum) + " damp " + std::to_string(opt.dampening) +
                               " wd " + std::to_string(opt.wd) + (opt.nesterov ? " nesterov" : "");
        EXPECT_TRUE(same_bits(olds[i].p, ps[i])) << "param " << at;
        if (has_buf) EXPECT_TRUE(same_bits(olds[i].m, bufs[i])) << "buf " << at;
        if (counted) EXPECT_EQ(ts[i].item<double>(), steps[i]) << "count " << at;
      }
    }
  set_num_threads(saved);
}

// A list naming one parameter twice updates it twice, in order, as two optimizer steps would.
TEST(OptimFusedOps, AdamNamingAParameterTwiceUpdatesItTwiceInOrder) {
  manual_seed(22);
  Operands o = make_operands({300}, DType::Float32, kDense);
  auto [a, c] = twins(o, kDense, kDense);
  Tensor lr = scalar_tensor(0.01, DType::Float64);
  Tensor ta = scalar_tensor(1.0, DType::Float64), tc = scalar_tensor(0.0, DType::Float64);
  for (int k = 0; k < 2; ++k) {
    old_adam(a.p, a.g, a.m, a.v, ta, lr, 0.01, 0.9, 0.999, 1e-8, 0.0, false);
    NoGradGuard ng;
    ta.add_(1.0);
  }
  {
    NoGradGuard ng;
    fused_adam_({c.p, c.p}, {c.g, c.g}, {c.m, c.m}, {c.v, c.v}, {tc, tc}, lr, 0.9, 0.999, 1e-8, 0.0, false);
  }
  EXPECT_TRUE(same_bits(a.m, c.m));
  EXPECT_TRUE(same_bits(a.v, c.v));
  EXPECT_TRUE(same_bits(a.p, c.p));
}

TEST(OptimFusedOps, SgdMatchesTheOldChainBitForBit) {
  manual_seed(12);
  int checked = 0;
  for_each_case([&](DType d, const Shape& s, Layout lp, Layout lg) {
          struct Opt { double momentum, dampening, wd; bool nesterov; };
          for (Opt opt : {Opt{0.0, 0.0, 0.0, false}, Opt{0.0, 0.0, 0.01, false}, Opt{0.9, 0.0, 0.0, false},
                          Opt{0.9, 0.1, 0.0, false}, Opt{0.5, 0.3, 0.02, false}, Opt{0.9, 0.0, 0.0, true},
                          Opt{0.7, 0.0, 0.05, true}})
            for (double step : {1.0, 5.0}) {  // the dampening factor is 1 on the first step
              if (step != 1.0 && opt.dampening == 0.0) continue;
              Operands o = make_operands(s, d, lg);
              auto [a, b] = twins(o, lp, lg);  // m serves as the momentum buffer
              const double lr_ = 0.01 + 0.05 * double(checked % 5);
              Tensor t = scalar_tensor(step, DType::Float64);
              old_sgd(a.p, a.g, a.m, t, lr_, opt.momentum, opt.dampening, opt.wd, opt.nesterov);
              {
                NoGradGuard ng;
                Tensor lr = scalar_tensor(lr_, DType::Float64);
                if (opt.momentum == 0.0) {
                  sgd_param_(b.p, lr, b.g, Tensor(), 0.0, opt.wd);
                } else {
                  Tensor f = opt.dampening == 0.0 ? Tensor() : sgd_dampening_factor(t, opt.dampening, d);
                  sgd_momentum_(b.m, b.g, opt.momentum, f, opt.wd != 0.0 ? b.p : Tensor(), opt.wd);
                  sgd_param_(b.p, lr, opt.nesterov ? b.g : Tensor(), b.m, opt.momentum, opt.wd);
                }
              }
              const std::string at = where_(s, d, lp, lg, "momentum " + std::to_string(opt.momentum) + " damp " +
                                                              std::to_string(opt.dampening) + " wd " +
                                                              std::to_string(opt.wd) + (opt.nesterov ? " nesterov" : "") +
                                                              " step " + std::to_string(step));
              Operands c = twins(o, lp, lg).first;
              Tensor tc = scalar_tensor(step - 1.0, DType::Float64);
              {
                NoGradGuard ng;
                const bool buf = opt.momentum != 0.0, counted = buf && opt.dampening != 0.0;
                fused_sgd_({c.p}, {c.g}, buf ? std::vector<Tensor>{c.m} : std::vector<Tensor>{},
                           counted ? std::vector<Tensor>{tc} : std::vector<Tensor>{},
                           scalar_tensor(lr_, DType::Float64), opt.momentum, opt.dampening, opt.wd, opt.nesterov);
                if (!counted) tc.add_(1.0);
              }
              EXPECT_TRUE(same_bits(a.m, b.m)) << "buf " << at;
              EXPECT_TRUE(same_bits(a.p, b.p)) << "param " << at;
              EXPECT_TRUE(same_bits(a.m, c.m)) << "fused_sgd_ buf " << at;
              EXPECT_TRUE(same_bits(a.p, c.p)) << "fused_sgd_ param " << at;
              EXPECT_EQ(tc.item<double>(), step) << "fused_sgd_ count " << at;
              ++checked;
            }
  });
  EXPECT_GT(checked, 400);
}

// ---- the optimizers over several steps against the old chains with their own state ----

struct Param {
  Tensor p;      // the optimizer's
  Tensor ref;    // the reference chain's copy
  Tensor s1, s2;  // reference state (exp_avg/exp_avg_sq or buf)
  Tensor count;
};

std::vector<Param> make_params(DType d) {
  std::vector<Param> ps;
  for (Shape s : std::vector<Shape>{{5, 4}, {4}, {3, 7, 2}, {}, {40000}}) {
    Tensor init = values(s, d, false);
    Param q;
    q.p = init.clone().requires_grad_();
    q.ref = init.clone();
    q.s1 = zeros(s, d);
    q.s2 = zeros(s, d);
    q.count = zeros({}, DType::Float64);
    ps.push_back(q);
  }
  // A transposed (non-contiguous) leaf, as a user may pass one.
  Tensor init = values({6, 3}, d, false);
  Param q;
  q.p = laid_out(init, kTransposed).detach().requires_grad_();
  q.ref = laid_out(init, kTransposed);
  q.s1 = zeros({6, 3}, d);
  q.s2 = zeros({6, 3}, d);
  q.count = zeros({}, DType::Float64);
  ps.push_back(q);
  return ps;
}

void run_steps(std::vector<Param>& ps, optim::Optimizer& opt, DType d,
               const std::function<void(Param&, const Tensor& g)>& reference) {
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < ps.size(); ++i) {
      Param& q = ps[i];
      if (step == 2 && i == 1) {  // a parameter without a gradient this step is skipped
        q.p.set_grad(Tensor());
        continue;
      }
      Tensor g = values(q.p.shape(), d, false);
      q.p.set_grad(g);
      {
        NoGradGuard ng;
        q.count.add_(1.0);
      }
      reference(q, g);
    }
    opt.step();
    for (size_t i = 0; i < ps.size(); ++i)
      ASSERT_TRUE(same_bits(ps[i].p.detach(), ps[i].ref)) << "param " << i << " after step " << step + 1;
  }
}

TEST(OptimFusedOps, AdamAndAdamWMatchTheOldStepOverSteps) {
  for (DType d : {DType::Float32, DType::Float64})
    for (double wd : {0.0, 0.03})
      for (bool decoupled : {false, true}) {
        manual_seed(21);
        std::vector<Param> ps = make_params(d);
        std::vector<Tensor> params;
        for (auto& q : ps) params.push_back(q.p);
        const double lr_ = 0.01;
        std::unique_ptr<optim::Adam> opt;
        if (decoupled) opt = std::make_unique<optim::AdamW>(params, lr_, std::pair{0.85, 0.995}, 1e-7, wd);
        else opt = std::make_unique<optim::Adam>(params, lr_, std::pair{0.85, 0.995}, 1e-7, wd);
        SCOPED_TRACE(std::string(dtype_name(d)) + " wd " + std::to_string(wd) + (decoupled ? " AdamW" : " Adam"));
        Tensor lr = scalar_tensor(lr_, DType::Float64);
        run_steps(ps, *opt, d, [&](Param& q, const Tensor& g) {
          old_adam(q.ref, g, q.s1, q.s2, q.count, lr, lr_, 0.85, 0.995, 1e-7, wd, decoupled);
        });
        for (size_t i = 0; i < ps.size(); ++i) {
          EXPECT_TRUE(same_bits(opt->exp_avg()[i], ps[i].s1)) << "exp_avg " << i;
          EXPECT_TRUE(same_bits(opt->exp_avg_sq()[i], ps[i].s2)) << "exp_avg_sq " << i;
        }
      }
}

TEST(OptimFusedOps, SgdMatchesTheOldStepOverSteps) {
  struct Opt { double momentum, dampening, wd; bool nesterov; };
  for (DType d : {DType::Float32, DType::Float64})
    for (Opt o : {Opt{0.0, 0.0, 0.0, false}, Opt{0.0, 0.0, 0.01, false}, Opt{0.9, 0.0, 0.0, false},
                  Opt{0.9, 0.2, 0.01, false}, Opt{0.8, 0.0, 0.02, true}}) {
      manual_seed(22);
      std::vector<Param> ps = make_params(d);
      std::vector<Tensor> params;
      for (auto& q : ps) params.push_back(q.p);
      optim::SGD opt(params, 0.05, o.momentum, o.dampening, o.wd, o.nesterov);
      SCOPED_TRACE(std::string(dtype_name(d)) + " momentum " + std::to_string(o.momentum) + " dampening " +
                   std::to_string(o.dampening) + " wd " + std::to_string(o.wd) + (o.nesterov ? " nesterov" : ""));
      run_steps(ps, opt, d, [&](Param& q, const Tensor& g) {
        old_sgd(q.ref, g, q.s1, q.count, 0.05, o.momentum, o.dampening, o.wd, o.nesterov);
      });
    }
}

TEST(OptimFusedOps, ResultsDoNotDependOnTheThreadCount) {
  const int before = num_threads();
  manual_seed(5);
  Operands o = make_operands({300, 301}, DType::Float32, kDense);
  std::vector<Operands> out;
  for (int n : {1, 2, 3}) {
    set_num_threads(n);
    auto [a, b] = twins(o, kDense, kDense);
    (void)b;
    NoGradGuard ng;
    Tensor lr = scalar_tensor(0.01, DType::Float64), t = scalar_tensor(3.0, DType::Float64);
    adam_exp_avg_(a.m, a.g, 0.9);
    adam_exp_avg_sq_(a.v, a.g, 0.999);
    adam_param_(a.p, a.m, a.v, adam_step_scalars(t, lr, 0.9, 0.999, DType::Float32), 1e-8, lr);
    out.push_back(a);
  }
  set_num_threads(before);
  for (size_t k = 1; k < out.size(); ++k) EXPECT_TRUE(same_bits(out[0].p, out[k].p)) << "threads " << k + 1;
}

}  // namespace
}  // namespace terra
