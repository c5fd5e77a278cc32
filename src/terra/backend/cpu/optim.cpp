// Fused optimizer updates (backend/optim_kernels.h). Every expression below spells out the op
// chain it replaces, operand for operand: each float operation rounds alone (the library builds
// with -ffp-contract=off) and vector and scalar iterations compute the same IEEE results.
#include "terra/backend/optim_kernels.h"

#include <array>
#include <cmath>
#include <type_traits>
#include <utility>

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
      for (int64_t i = b; i < e; ++i) po[i] = f(po[i], p[i]...);
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

void adam_param(const KernelArgs& k) {
  const double wd = k.attrs.f("weight_decay");
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    const T sc0 = scalar<T>(k.in[3]), sc1 = scalar<T>(k.in[4]), eps = T(k.attrs.f("eps"));
    // AdamW's p.mul_(1 - lr * wd): the factor computed in double on the host, rounded once.
    const T decay = T(1.0 - scalar<double>(k.in[5]) * wd);
    with_flag(wd != 0.0, [&](auto decoupled) {
      update_loop<T>(
          k.out[0],
          [=](T p, T m, T v) {
            if constexpr (decltype(decoupled)::value) p = p * decay;
            // denom = sqrt(v) / sc0 + eps; p += (m / denom) * sc1
            return p + (m / (std::sqrt(v) / sc0 + eps)) * sc1;
          },
          k.in[1], k.in[2]);
    });
  });
}

void sgd_momentum(const KernelArgs& k) {
  const bool has_param = k.attrs.b("has_param"), damp = k.attrs.b("has_dampening");
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    const T mom = T(k.attrs.f("momentum")), wd = T(k.attrs.f("weight_decay"));
    // buf.mul_(momentum); buf.add_(d) or buf += d * factor
    const T fac = damp ? scalar<T>(k.in[has_param ? 3 : 2]) : T(1);
    with_flag(damp, [&](auto dampened) {
      auto upd = [=](T buf, T d) {
        if constexpr (decltype(dampened)::value) return buf * mom + d * fac;
        else return buf * mom + d;
      };
      if (has_param)
        update_loop<T>(k.out[0], [=](T buf, T g, T p) { return upd(buf, g + p * wd); }, k.in[1], k.in[2]);
      else
        update_loop<T>(k.out[0], [=](T buf, T g) { return upd(buf, g); }, k.in[1]);
    });
  });
}

void sgd_param(const KernelArgs& k) {
  const bool has_grad = k.attrs.b("has_grad"), has_buf = k.attrs.b("has_buffer");
  const double wd = k.attrs.f("weight_decay");
  visit_floating(k.out[0].dtype(), [&](auto z) {
    using T = decltype(z);
    // add_inplace(p, d * -lr): -lr rounded once to T as scalar_like does.
    const T neg_lr = T(-scalar<double>(k.in[1])), mom = T(k.attrs.f("momentum")), wdt = T(wd);
    const Tensor& out = k.out[0];
    if (!has_grad) {  // plain momentum: d = buf
      update_loop<T>(out, [=](T p, T buf) { return p + buf * neg_lr; }, k.in[2]);
      return;
    }
    with_flag(wd != 0.0, [&](auto decay) {
      auto grad = [=](T p, T g) {
        if constexpr (decltype(decay)::value) return g + p * wdt;
        else return g;
      };
      if (has_buf)  // Nesterov: d = d + buf * momentum
        update_loop<T>(out, [=](T p, T g, T buf) { return p + (grad(p, g) + buf * mom) * neg_lr; }, k.in[2], k.in[3]);
      else
        update_loop<T>(out, [=](T p, T g) { return p + grad(p, g) * neg_lr; }, k.in[2]);
    });
  });
}

}  // namespace terra::kernels
