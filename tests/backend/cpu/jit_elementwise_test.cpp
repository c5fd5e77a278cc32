// The generated elementwise kernels against the tile functions (the element functions eager
// runs): bit for bit on values that tell rounding and special cases apart, for every op with a
// tile function and every operand kind; kernels that do not fit the registers fall back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <terra/terra.h>

#include "terra/backend/cpu/jit_elementwise.h"
#include "terra/compile/fused_elementwise.h"
#include "terra/compile/passes.h"

namespace terra::cpu {
namespace {

const Attrs kNoAttrs;

bool avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

// Around every threshold of vexp / vtanh, specials, and spread-out random values.
std::vector<float> probe_values(size_t n, uint64_t seed) {
  std::vector<float> v;
  const float inf = std::numeric_limits<float>::infinity();
  for (float c : {-103.98f, -86.6f, 88.72f, 0.625f, -0.625f, 0.0f, 1.0f, -1.0f, 20.0f, -20.0f, 9.0f})
    for (int k = -3; k <= 3; ++k) {  // c and its three neighbours on each side
      float x = c;
      for (int i = 0; i < std::abs(k); ++i) x = std::nextafter(x, k < 0 ? -inf : inf);
      v.push_back(x);
    }
  for (float s : {inf, -inf, NAN, -NAN, 0.0f, -0.0f, 1e-42f, -1e-42f, 1e-38f, 3e38f, -3e38f, 1e-7f, -1e-7f})
    v.push_back(s);
  manual_seed(seed);
  for (float scale : {0.01f, 1.0f, 30.0f, 120.0f}) {
    std::vector<float> r = (randn({64}) * double(scale)).to_vector<float>();
    v.insert(v.end(), r.begin(), r.end());
  }
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = v[(i * 7919) % v.size()];
  return out;
}

std::vector<float> no_nan(std::vector<float> v) {
  for (float& x : v)
    if (std::isnan(x)) x = 0.5f;
  return v;
}

TEST(JitElementwise, EveryTileFunctionHasASequence) {
  int n = 0;
  for (const OpDef* op : all_ops())
    if (op->tile_f32) {
      EXPECT_TRUE(jit_supports(*op)) << op->name << " has a float32 tile function but no generated sequence";
      n++;
    }
  EXPECT_GE(n, 18);
}

// Each op alone: inputs as full arrays or broadcast scalars, against its tile function. NaNs go in
// one operand at a time (with two, x86 returns the first operand's, and which is first is the
// compiler's choice for the tile function).
TEST(JitElementwise, EachOpMatchesItsTileFunctionBitForBit) {
  if (!avx2()) GTEST_SKIP() << "no AVX2";
  const size_t n = 8 * 97;
  int checked = 0;
  for (const OpDef* op : all_ops()) {
    if (!op->tile_f32) continue;
    bool binary = op->has(kInplace);
    for (const char* b : {"add", "sub", "mul", "div", "maximum", "minimum"}) binary |= std::strcmp(op->name, b) == 0;
    const JitSlot full = JitSlot::Full, scalar = JitSlot::Scalar;
    std::vector<std::pair<JitSlot, JitSlot>> kinds = {{full, full}};
    if (binary) kinds = {{full, full}, {full, scalar}, {scalar, full}};
    for (int nan_in = 0; nan_in < (binary ? 2 : 1); ++nan_in)
      for (auto [ka, kb] : kinds) {
        std::vector<float> a = probe_values(n, 1), b = probe_values(n, 2);
        if (binary) (nan_in == 0 ? b : a) = no_nan(nan_in == 0 ? b : a);
        std::vector<float> want(n), got(n, 1.25f);
        if (ka == scalar) a[0] = 1.5f;
        if (kb == scalar) b[0] = -0.75f;
        TileArgs t;
        t.in[0] = a.data();
        t.step[0] = ka == scalar ? 0 : 1;
        t.in[1] = b.data();
        t.step[1] = kb == scalar ? 0 : 1;
        t.out = want.data();
        t.n = int64_t(n);
        op->tile_f32(t);
        // slots: 0 a, 1 b (binary), last: the output
        JitOp o{op, {0, 1}, binary ? 2u : 1u, binary ? 2u : 1u};
        std::vector<JitSlot> slots = binary ? std::vector<JitSlot>{ka, kb, full} : std::vector<JitSlot>{ka, full};
        auto k = jit_elementwise(std::span<const JitOp>(&o, 1), slots);
        ASSERT_TRUE(k) << op->name;
        float* ptrs[3] = {a.data(), binary ? b.data() : got.data(), got.data()};
        (*k)(ptrs, int64_t(n));
        size_t bad = 0, first = n;
        for (size_t i = 0; i < n; ++i)
          if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0 && bad++ == 0) first = i;
        EXPECT_EQ(bad, 0u) << op->name << " kinds " << int(ka) << int(kb) << ": first at " << first << " a="
                           << a[ka == scalar ? 0 : first % n] << " want " << want[first % n] << " got " << got[first % n];
        checked++;
      }
  }
  EXPECT_GE(checked, 18);
}

Tensor chain_unfused(const Tensor& x, const Tensor& y, const Tensor& s1, const Tensor& s2) {
  Tensor t = add(mul(x, s1), y);
  t = sub(mul(t, t), x);
  t = tanh(add(div(t, s2), y));
  return sub(mul(t, s1), sigmoid(t));
}

// The chain in registers through run_fused, at sizes with a tail and split across threads: a
// kernel is generated, and it gives eager's bits; with the pass off, the tile path gives them too.
TEST(JitElementwise, ChainThroughRunFusedMatchesEager) {
  if (!avx2()) GTEST_SKIP() << "no AVX2";
  using compile::FusedKernel;
  for (int threads : {1, 2})
    for (int64_t n : {8, 13, 4099, 100003}) {
      const int old = num_threads();
      set_num_threads(threads);
      manual_seed(uint64_t(n));
      Tensor x = randn({n}) * 3.0, y = randn({n}), s1 = scalar_tensor(0.5), s2 = scalar_tensor(3.0);
      FusedKernel k;
      k.numel = n;
      k.slot_dtype.assign(4, DType::Float32);
      auto op = [&](const char* name, std::vector<uint32_t> in) {
        uint32_t out = uint32_t(k.slot_dtype.size());
        k.slot_dtype.push_back(DType::Float32);
        k.ops.push_back({find_op(name), &kNoAttrs, std::move(in), out});
        return out;
      };
      uint32_t t = op("add", {op("mul", {0, 2}), 1});
      t = op("sub", {op("mul", {t, t}), 0});
      t = op("tanh", {op("add", {op("div", {t, 3}), 1})});
      op("sub", {op("mul", {t, 2}), op("sigmoid", {t})});
      const Tensor want = chain_unfused(x, y, s1, s2);
      for (bool jit : {true, false}) {
        compile::set_pass_enabled(compile::Pass::JitElementwise, jit);
        std::vector<Tensor> slots(k.slot_dtype.size());
        slots[0] = x, slots[1] = y, slots[2] = s1, slots[3] = s2;
        slots.back() = empty({n});
        const int64_t made = jit_kernels_made();
        compile::run_fused(k, slots);
        compile::set_pass_enabled(compile::Pass::JitElementwise, true);
        std::vector<float> a = want.to_vector<float>(), b = slots.back().to_vector<float>();
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "n=" << n << " jit=" << jit;
        if (jit && n == 8 && threads == 1) EXPECT_EQ(jit_kernels_made(), made + 1);  // the first run makes it
      }
      set_num_threads(old);
    }
}

// Twelve values alive at once need more than the ten value registers: no kernel, and the tile path
// still computes the sum.
TEST(JitElementwise, TooManyLiveValuesFallBackToTheTilePath) {
  std::vector<JitOp> ops;
  std::vector<JitSlot> slots(12, JitSlot::Full);
  for (uint32_t i = 0; i < 12; ++i) {
    slots.push_back(JitSlot::Scratch);
    ops.push_back({find_op("exp"), {i, 0}, 1, 12 + i});
  }
  uint32_t acc = 12;
  for (uint32_t i = 1; i < 12; ++i) {
    slots.push_back(i == 11 ? JitSlot::Full : JitSlot::Scratch);
    ops.push_back({find_op("add"), {acc, 12 + i}, 2, uint32_t(slots.size() - 1)});
    acc = uint32_t(slots.size() - 1);
  }
  EXPECT_FALSE(jit_elementwise(ops, slots));

  // Five values at once fit.
  std::vector<JitOp> few(ops.begin(), ops.begin() + 2);
  few.push_back({find_op("add"), {12, 13}, 2, 24});
  std::vector<JitSlot> fs(slots.begin(), slots.begin() + 24);
  fs.push_back(JitSlot::Full);
  if (avx2()) EXPECT_TRUE(jit_elementwise(few, fs));

  compile::FusedKernel k;
  const int64_t n = 1000;
  k.numel = n;
  k.slot_dtype.assign(slots.size(), DType::Float32);
  for (const JitOp& o : ops)
    k.ops.push_back({o.op, &kNoAttrs, o.n_in == 2 ? std::vector<uint32_t>{o.in[0], o.in[1]} : std::vector<uint32_t>{o.in[0]}, o.out});
  std::vector<Tensor> ts(slots.size());
  manual_seed(5);
  Tensor want;
  for (int i = 0; i < 12; ++i) {
    ts[size_t(i)] = randn({n});
    want = i == 0 ? exp(ts[0]) : add(want, exp(ts[size_t(i)]));
  }
  ts.back() = empty({n});
  compile::run_fused(k, ts);
  EXPECT_EQ(want.to_vector<float>(), ts.back().to_vector<float>());
}

// An in-place target that shares its memory with another operand: the tile loop reads operands op
// by op (the later read sees the write), so the generated code (one load per vector) is not used.
TEST(JitElementwise, InPlaceTargetSharingAnOperandsMemoryMatchesEager) {
  const int64_t n = 4096;
  manual_seed(9);
  Tensor base = randn({n}), other = randn({n});
  Tensor want_a = base.clone();
  add_inplace(want_a, other);                 // a += other
  Tensor want = mul(want_a, want_a);          // read again through the alias: the new value
  Tensor a = base.clone();
  Tensor alias = a.view({n});                 // same storage, same offset
  compile::FusedKernel k;
  k.numel = n;
  k.slot_dtype.assign(4, DType::Float32);
  // slots: 0 a (target), 1 other, 2 alias of a, 3 out
  k.ops = {{find_op("add_"), &kNoAttrs, {0, 1}, 0}, {find_op("mul"), &kNoAttrs, {2, 2}, 3}};
  std::vector<Tensor> slots{a, other, alias, empty({n})};
  compile::run_fused(k, slots);
  EXPECT_EQ(want.to_vector<float>(), slots[3].to_vector<float>());
  EXPECT_EQ(want_a.to_vector<float>(), a.to_vector<float>());
}

}  // namespace
}  // namespace terra::cpu
