// Fused optimizer updates (backend/optim_kernels.h). Every expression below spells out the op
// chain it replaces, operand for operand: each float operation rounds alone (the library builds
// with -ffp-contract=off) and vector and scalar iterations compute the same IEEE results.
#include "terra/backend/optim_kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>
#include <tuple>
#include <utility>
#include <vector>

#include "terra/backend/cpu/loops.h"

namespace terra::kernels {
namespace {

template <class T>
T scalar(const Tensor& t) {
  return *t.impl()->data_as<T>();
}

template <class F, class T, size_t N, size_t... K>
T call_at(F& f, T o, const std::array<const T*, N>& p, const std::array<int64_t, N + 1>& off,
          std::index_sequence<K...>) {
  return f(o, p[K][off[K + 1]]...);
}

// out[i] = f(out[i], in[i]...) over operands of out's shape and dtype. All contiguous (parameters,
// optimizer state and torch-layout grads): a dense loop the compiler vectorizes; otherwise the
// strided walk the elementwise ops use. Each element depends on its own index only, so neither
// the thread count nor the path changes a bit.
template <class T, class F, class... In>
void update_loop(const Tensor& out, F f, const In&... in) {
  TensorImpl& o = *out.impl();
  T* po = o.data_as<T>();
  const int64_t n = o.numel;
  if (o.is_contiguous() && (in.impl()->is_contiguous() && ...)) {
    cpu::parallel_for(n, cpu::kGrain, [&, ... p = in.impl()->template data_as<T>()](int64_t b, int64_t e) {
      // The loop's own copies (as cpu::unary_loop): read through the closure, f's scalars may alias
      // the stores (the same type) and are reloaded in the loop body (these loops vectorized anyway).
      T* o_ = po;
      const F g = f;
      for (int64_t i = b; i < e; ++i) o_[i] = g(o_[i], p[i]...);
    });
    return;
  }
  constexpr size_t N = sizeof...(In);
  const std::array<const T*, N> ps{in.impl()->template data_as<T>()...};
  const std::array<const int64_t*, N + 1> st{o.strides.data(), in.impl()->strides.data()...};
  cpu::parallel_for(n, cpu::kGrain, [&](int64_t b, int64_t e) {
    cpu::strided_range<N + 1>(o.shape, st, b, e, [&](const std::array<int64_t, N + 1>& off) {
      po[off[0]] = call_at(f, po[off[0]], ps, off, std::make_index_sequence<N>{});
    });
  });
}

// Calls f(std::true_type) or f(std::false_type): a flag fixed per call becomes a compile-time
// branch, so the element loop has none.
template <class F>
void with_flag(bool flag, F&& f) {
  if (flag) f(std::true_type{});
  else f(std::false_type{});
}

}  // namespace

void adam_exp_avg(const KernelArgs& k) {
  const double beta1 = k.attrs.f("beta1");
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    // m.mul_(beta1).add_(d, 1 - beta1): scalar_like rounds each host double once to T, and
    // add_ with alpha exactly 1 adds d itself.
    const T b1 = T(beta1), c1 = T(1.0 - beta1), wd = T(k.attrs.f("weight_decay"));
    with_flag(1.0 - beta1 != 1.0, [&](auto scaled) {
      auto upd = [=](T m, T d) {
        if constexpr (decltype(scaled)::value) return m * b1 + d * c1;
        else return m * b1 + d;
      };
      if (k.attrs.b("has_param"))
        update_loop<T>(k.out[0], [=](T m, T g, T p) { return upd(m, g + p * wd); }, k.in[1], k.in[2]);
      else
        update_loop<T>(k.out[0], [=](T m, T g) { return upd(m, g); }, k.in[1]);
    });
  });
}

void adam_exp_avg_sq(const KernelArgs& k) {
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    // v.mul_(beta2); v += d * (d * (1 - beta2))
    const T b2 = T(k.attrs.f("beta2")), c2 = T(1.0 - k.attrs.f("beta2")), wd = T(k.attrs.f("weight_decay"));
    auto upd = [=](T v, T d) { return v * b2 + d * (d * c2); };
    if (k.attrs.b("has_param"))
      update_loop<T>(k.out[0], [=](T v, T g, T p) { return upd(v, g + p * wd); }, k.in[1], k.in[2]);
    else
      update_loop<T>(k.out[0], [=](T v, T g) { return upd(v, g); }, k.in[1]);
  });
}

namespace {
// p = p (* decay) + (m / (sqrt(v) / sc0 + eps)) * sc1 (adam_param's update with its scalars as values).
template <class T>
void adam_param_loop(const Tensor& p, const Tensor& m, const Tensor& v, T sc0, T sc1, T eps, T decay, bool decoupled) {
  with_flag(decoupled, [&](auto dec) {
    update_loop<T>(
        p,
        [=](T x, T m1, T v1) {
          if constexpr (decltype(dec)::value) x = x * decay;
          // denom = sqrt(v) / sc0 + eps; p += (m / denom) * sc1
          return x + (m1 / (std::sqrt(v1) / sc0 + eps)) * sc1;
        },
        m, v);
  });
}
}  // namespace

void adam_param(const KernelArgs& k) {
  const double wd = k.attrs.f("weight_decay");
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    // AdamW's p.mul_(1 - lr * wd): the factor computed in double on the host, rounded once.
    adam_param_loop<T>(k.out[0], k.in[1], k.in[2], scalar<T>(k.in[3]), scalar<T>(k.in[4]), T(k.attrs.f("eps")),
                       T(1.0 - scalar<double>(k.in[5]) * wd), wd != 0.0);
  });
}

namespace {
// buf = buf * momentum + d (* fac when dampened), d = g (+ p * wd when `p` is given).
template <class T>
void sgd_momentum_loop(const Tensor& buf, const Tensor& g, const Tensor* p, T mom, T wd, bool damp, T fac) {
  // buf.mul_(momentum); buf.add_(d) or buf += d * factor
  with_flag(damp, [&](auto dampened) {
    auto upd = [=](T b, T d) {
      if constexpr (decltype(dampened)::value) return b * mom + d * fac;
      else return b * mom + d;
    };
    if (p)
      update_loop<T>(buf, [=](T b, T g1, T p1) { return upd(b, g1 + p1 * wd); }, g, *p);
    else
      update_loop<T>(buf, [=](T b, T g1) { return upd(b, g1); }, g);
  });
}

// p = p + d * neg_lr with d = g (+ p * wd when wd != 0); with a buffer d = buf, or d + buf * mom
// when g is also given (Nesterov).
template <class T>
void sgd_param_loop(const Tensor& out, const Tensor* g, const Tensor* buf, T neg_lr, T mom, double wd) {
  if (!g) {  // plain momentum: d = buf
    update_loop<T>(out, [=](T p, T b) { return p + b * neg_lr; }, *buf);
    return;
  }
  const T wdt = T(wd);
  with_flag(wd != 0.0, [&](auto decay) {
    auto grad = [=](T p, T g1) {
      if constexpr (decltype(decay)::value) return g1 + p * wdt;
      else return g1;
    };
    if (buf)  // Nesterov: d = d + buf * momentum
      update_loop<T>(out, [=](T p, T g1, T b) { return p + (grad(p, g1) + b * mom) * neg_lr; }, *g, *buf);
    else
      update_loop<T>(out, [=](T p, T g1) { return p + grad(p, g1) * neg_lr; }, *g);
  });
}
}  // namespace

void sgd_momentum(const KernelArgs& k) {
  const bool has_param = k.attrs.b("has_param"), damp = k.attrs.b("has_dampening");
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    const T fac = damp ? scalar<T>(k.in[has_param ? 3 : 2]) : T(1);
    sgd_momentum_loop<T>(k.out[0], k.in[1], has_param ? &k.in[2] : nullptr, T(k.attrs.f("momentum")),
                         T(k.attrs.f("weight_decay")), damp, fac);
  });
}

void sgd_param(const KernelArgs& k) {
  const bool has_grad = k.attrs.b("has_grad"), has_buf = k.attrs.b("has_buffer");
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    // add_inplace(p, d * -lr): -lr rounded once to T as scalar_like does.
    sgd_param_loop<T>(k.out[0], has_grad ? &k.in[2] : nullptr, has_buf ? &k.in[2 + has_grad] : nullptr,
                      T(-scalar<double>(k.in[1])), T(k.attrs.f("momentum")), k.attrs.f("weight_decay"));
  });
}

namespace {

template <class T>
struct AdamConsts {
  T b1, c1, b2, c2, wd, decay, eps, sc0, sc1;
};

// adam_exp_avg_, adam_exp_avg_sq_ and adam_param_ of elements [b, e), in that order per element.
// Separate restrict-qualified operands (one_pass checked they share no memory) let the compiler
// vectorize the loop; each element's float operations are the three kernels' own.
template <class T, bool Coupled, bool Scaled, bool Decoupled>
void adam_pass(T* __restrict pp, T* __restrict pm, T* __restrict pv, const T* __restrict pg, int64_t b, int64_t e,
               const AdamConsts<T> c) {
  for (int64_t j = b; j < e; ++j) {
    T d = pg[j];
    if constexpr (Coupled) d = pg[j] + pp[j] * c.wd;
    T mj;
    if constexpr (Scaled) mj = pm[j] * c.b1 + d * c.c1;
    else mj = pm[j] * c.b1 + d;
    const T vj = pv[j] * c.b2 + d * (d * c.c2);
    T x = pp[j];
    if constexpr (Decoupled) x = x * c.decay;
    pm[j] = mj;
    pv[j] = vj;
    pp[j] = x + (mj / (std::sqrt(vj) / c.sc0 + c.eps)) * c.sc1;
  }
}

// Many parameters' dense updates as one element range, so whether to split across the pool is
// decided once for all of them (each alone is usually below any grain): element j of parameter i
// sits at offset[i] + j.
// Elements are independent, so any split gives the same values. P holds a parameter's pointers
// and constants; run(f) calls f(P, lo, hi) over pieces of the parameters.
template <class P>
struct ParamBatch {
  std::vector<P> params;
  std::vector<int64_t> offset{0};

  void add(const P& p, int64_t numel) {
    params.push_back(p);
    offset.push_back(offset.back() + numel);
  }
  template <class F>
  void run(int64_t grain, F&& f) {
    if (params.empty()) return;
    cpu::parallel_for(offset.back(), grain, [&](int64_t b, int64_t e) {
      size_t i = size_t(std::upper_bound(offset.begin(), offset.end(), b) - offset.begin()) - 1;
      for (; b < e; ++i) {
        const int64_t end = std::min(e, offset[i + 1]);
        f(params[i], b - offset[i], end - offset[i]);
        b = end;
      }
    });
    params.clear();
    offset.resize(1);
  }
};

// Whether the tensors an update writes (k.in[0, targets)) share storage with no other operand it
// reads or writes (the grads, k.in[grads, grads + n)): only then may the parameters' updates run
// in any order, as one range. (Else: parameter by parameter, in order.)
bool disjoint_targets(const KernelArgs& k, size_t targets, size_t grads, size_t n) {
  std::vector<const Storage*> t;
  t.reserve(targets);
  for (size_t i = 0; i < targets; ++i) t.push_back(k.in[i].impl()->storage.get());
  std::sort(t.begin(), t.end());
  if (std::adjacent_find(t.begin(), t.end()) != t.end()) return false;
  for (size_t i = grads; i < grads + n; ++i)
    if (std::binary_search(t.begin(), t.end(), k.in[i].impl()->storage.get())) return false;
  return true;
}

// Dense operands that share no memory: one pass per element may replace an update's passes.
bool dense_and_apart(std::initializer_list<const Tensor*> ts) {
  for (auto a = ts.begin(); a != ts.end(); ++a) {
    if (!(*a)->impl()->is_contiguous()) return false;
    for (auto b = ts.begin(); b != a; ++b)
      if ((*a)->impl()->storage == (*b)->impl()->storage) return false;
  }
  return true;
}

// Elements below which an optimizer's update stays on the calling thread: a split pays only for
// large parameter sets. Measured on bench/python_loop.py's width-128 MLP (100K parameters, each
// below kGrain): split at a quarter grain, eager's steps ran 10 % slower (the worker's half of the
// parameters moves to its core and back for the next forward); on the GraphRunner the split took
// Adam from 109 to 41 us a step in some processes and made co-execution slower in others.
constexpr int64_t kUpdateGrain = 4 * cpu::kGrain;

template <class T>
struct AdamParam {
  T *p, *m, *v;
  const T* g;
  AdamConsts<T> c;
};

template <class T>
void run_adam(ParamBatch<AdamParam<T>>& batch, bool coupled, bool scaled, bool decoupled) {
  with_flag(coupled, [&](auto cp) {
    with_flag(scaled, [&](auto sc) {
      with_flag(decoupled, [&](auto dc) {
        batch.run(cpu::finer_grain(kUpdateGrain), [&](const AdamParam<T>& q, int64_t lo, int64_t hi) {
          adam_pass<T, decltype(cp)::value, decltype(sc)::value, decltype(dc)::value>(q.p, q.m, q.v, q.g, lo, hi, q.c);
        });
      });
    });
  });
}

}  // namespace

void fused_adam(const KernelArgs& k) {
  const size_t n = size_t(k.attrs.i("n"));
  const double beta1 = k.attrs.f("beta1"), beta2 = k.attrs.f("beta2"), eps = k.attrs.f("eps");
  const double wd = k.attrs.f("weight_decay");
  const bool decoupled = k.attrs.b("decoupled"), coupled = wd != 0.0 && !decoupled;
  const bool dec = decoupled && wd != 0.0, scaled = 1.0 - beta1 != 1.0;
  const double lr = scalar<double>(k.in[5 * n]);
  const bool together = disjoint_targets(k, 3 * n, 4 * n, n);
  // The per-parameter ops' attributes, for parameters the single pass does not take.
  const Attrs am{{"beta1", beta1}, {"weight_decay", wd}, {"has_param", coupled}};
  const Attrs av{{"beta2", beta2}, {"weight_decay", wd}, {"has_param", coupled}};
  ParamBatch<AdamParam<float>> f32;
  ParamBatch<AdamParam<double>> f64;
  for (size_t i = 0; i < n; ++i) {
    const Tensor &p = k.in[i], &m = k.in[n + i], &v = k.in[2 * n + i], &t = k.in[3 * n + i], &g = k.in[4 * n + i];
    double& count = *t.impl()->data_as<double>();
    count = count + 1.0;  // the parameter's step count (add_(1))
    visit_floating(p.dtype(), [&](auto z) {
      using T = decltype(z);
      // adam_step_scalars: in double, each rounded once to T.
      const T sc0 = T(std::sqrt(1.0 - std::pow(beta2, count))), sc1 = T(-lr / (1.0 - std::pow(beta1, count)));
      const T epst = T(eps), decay = T(1.0 - lr * (decoupled ? wd : 0.0));
      if (!dense_and_apart({&p, &m, &v, &g})) {  // the three updates one after the other, as the ops ran them
        std::vector<Tensor> in{m, g}, out{m};
        if (coupled) in.push_back(p);
        adam_exp_avg(KernelArgs{in, out, am, {}});
        in[0] = out[0] = v;
        adam_exp_avg_sq(KernelArgs{in, out, av, {}});
        adam_param_loop<T>(p, m, v, sc0, sc1, epst, decay, dec);
        return;
      }
      auto& batch = std::get<ParamBatch<AdamParam<T>>&>(std::tie(f32, f64));
      const AdamConsts<T> c{T(beta1), T(1.0 - beta1), T(beta2), T(1.0 - beta2), T(wd), decay, epst, sc0, sc1};
      batch.add({p.impl()->data_as<T>(), m.impl()->data_as<T>(), v.impl()->data_as<T>(), g.impl()->data_as<T>(), c},
                p.impl()->numel);
      if (!together) run_adam(batch, coupled, scaled, dec);
    });
  }
  run_adam(f32, coupled, scaled, dec);
  run_adam(f64, coupled, scaled, dec);
}

namespace {

template <class T>
struct SgdParam {
  T *p, *buf;  // buf: null without momentum
  const T* g;
  T fac;  // the dampening factor of the parameter's counted step (1 undampened)
};
template <class T>
struct SgdConsts {
  T neg_lr, mom, wd;
};

// sgd_momentum_ then sgd_param_ of elements [b, e), in that order per element (each element's
// float operations are the two loops' own; restrict-qualified operands that share no memory).
template <class T, bool HasBuf, bool Decay, bool Damp, bool Nesterov>
void sgd_pass(T* __restrict p, T* __restrict buf, const T* __restrict g, int64_t b, int64_t e, T fac,
              const SgdConsts<T> c) {
  for (int64_t j = b; j < e; ++j) {
    T d = g[j];
    if constexpr (Decay) d = g[j] + p[j] * c.wd;
    if constexpr (!HasBuf) {
      p[j] = p[j] + d * c.neg_lr;
    } else {
      T bj;
      if constexpr (Damp) bj = buf[j] * c.mom + d * fac;
      else bj = buf[j] * c.mom + d;
      buf[j] = bj;
      if constexpr (Nesterov) p[j] = p[j] + (d + bj * c.mom) * c.neg_lr;
      else p[j] = p[j] + bj * c.neg_lr;
    }
  }
}

template <class T>
void run_sgd(ParamBatch<SgdParam<T>>& batch, const SgdConsts<T>& c, bool has_buf, bool decay, bool damp,
             bool nesterov) {
  with_flag(has_buf, [&](auto hb) {
    with_flag(decay, [&](auto dc) {
      with_flag(damp, [&](auto dp) {
        with_flag(nesterov, [&](auto nv) {
          batch.run(cpu::finer_grain(kUpdateGrain), [&](const SgdParam<T>& q, int64_t lo, int64_t hi) {
            sgd_pass<T, decltype(hb)::value, decltype(dc)::value, decltype(dp)::value, decltype(nv)::value>(
                q.p, q.buf, q.g, lo, hi, q.fac, c);
          });
        });
      });
    });
  });
}

}  // namespace

void fused_sgd(const KernelArgs& k) {
  const size_t n = size_t(k.attrs.i("n"));
  const double momentum = k.attrs.f("momentum"), dampening = k.attrs.f("dampening"), wd = k.attrs.f("weight_decay");
  const bool nesterov = k.attrs.b("nesterov"), has_buf = momentum != 0.0, has_count = has_buf && dampening != 0.0;
  const size_t g0 = n * (1 + has_buf + has_count);  // the grads follow the targets
  const double lr = scalar<double>(k.in[g0 + n]);
  const bool together = disjoint_targets(k, n * (1 + has_buf), g0, n);
  ParamBatch<SgdParam<float>> f32;
  ParamBatch<SgdParam<double>> f64;
  const SgdConsts<float> c32{float(-lr), float(momentum), float(wd)};
  const SgdConsts<double> c64{-lr, momentum, wd};
  auto run = [&](auto& batch, const auto& c) { run_sgd(batch, c, has_buf, wd != 0.0, has_count, nesterov && has_buf); };
  for (size_t i = 0; i < n; ++i) {
    const Tensor &p = k.in[i], &g = k.in[g0 + i];
    visit_floating(p.dtype(), [&](auto z) {
      using T = decltype(z);
      const T neg_lr = T(-lr);
      T fac = T(1);
      if (has_count) {  // sgd_dampening_factor of the counted step
        double& count = *k.in[2 * n + i].impl()->data_as<double>();
        count = count + 1.0;
        fac = T(count == 1.0 ? 1.0 : 1.0 - dampening);
      }
      const Tensor* buf = has_buf ? &k.in[n + i] : nullptr;
      if (!(buf ? dense_and_apart({&p, &g, buf}) : dense_and_apart({&p, &g}))) {  // the ops' own passes
        if (!buf) return sgd_param_loop<T>(p, &g, nullptr, neg_lr, T(0.0), wd);  // sgd_param_(p, lr, g)
        sgd_momentum_loop<T>(*buf, g, wd != 0.0 ? &p : nullptr, T(momentum), T(wd), has_count, fac);
        sgd_param_loop<T>(p, nesterov ? &g : nullptr, buf, neg_lr, T(momentum), wd);
        return;
      }
      auto& batch = std::get<ParamBatch<SgdParam<T>>&>(std::tie(f32, f64));
      batch.add({p.impl()->data_as<T>(), buf ? buf->impl()->data_as<T>() : nullptr, g.impl()->data_as<T>(), fac},
                p.impl()->numel);
      if (!together) run(batch, std::get<const SgdConsts<T>&>(std::tie(c32, c64)));
    });
  }
  run(f32, c32);
  run(f64, c64);
}

}  // namespace terra::kernels
