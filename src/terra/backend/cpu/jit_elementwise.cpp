#include "terra/backend/cpu/jit_elementwise.h"

#include <xbyak/xbyak.h>
#include <xbyak/xbyak_util.h>

#include <atomic>
#include <bit>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "terra/backend/cpu/vector_math.h"

namespace terra::cpu {
namespace {

using Xbyak::Ymm;

// vcmpps predicates: ordered and quiet, as C++'s <, > and != compile (NaN compares false; x != x
// is the unordered test).
constexpr uint8_t kLT = 0x11, kGT = 0x1E, kUnord = 0x03;

// Registers: ymm0-9 hold values, ymm10-15 are the scratch of one op's sequence.
constexpr int kValueRegs = 10;

class Gen : public Xbyak::CodeGenerator {
 public:
  Gen() : Xbyak::CodeGenerator(kMaxCode, Xbyak::DontSetProtectRWE) {}
  static constexpr size_t kMaxCode = 64 * 1024;

  // A 32-byte constant (the value in every lane), placed after the code.
  Xbyak::Address cst(float v) { return bits(std::bit_cast<uint32_t>(v)); }
  Xbyak::Address bits(uint32_t b) { return ptr[rip + consts_[b]]; }
  void emit_consts() {
    align(32);
    for (auto& [b, label] : consts_) {
      L(label);
      for (int i = 0; i < 8; ++i) dd(b);
    }
  }

  static Ymm T(int i) { return Ymm(kValueRegs + i); }

  // vexp (vector_math.h) of x into d, using T(t0..t0+3); d may be x. Reads x up to the last op.
  void exp(const Ymm& d, const Ymm& x, int t0) {
    using namespace exp_k;
    const Ymm xc = T(t0), t = T(t0 + 1), ni = T(t0 + 2), w = T(t0 + 3);
    // xc = min(max(x, lo), hi): std::max(a, c) is (a < c) ? c : a, which is vmaxps(c, a) (the
    // second operand when unordered); std::min(a, c) is (c < a) ? c : a, vminps(c, a).
    vmovaps(xc, cst(kLo));
    vmaxps(xc, xc, x);
    vmovaps(w, cst(kHi));
    vminps(xc, w, xc);
    vmulps(t, xc, cst(kLog2e));
    vaddps(t, t, cst(kRound));
    vpsubd(ni, t, bits(uint32_t(kRoundBits)));
    vsubps(t, t, cst(kRound));  // n
    vmulps(w, t, cst(kLn2Hi));
    vsubps(xc, xc, w);
    vmulps(w, t, cst(kLn2Lo));
    vaddps(xc, xc, w);  // r
    vmulps(t, xc, cst(kP[0]));
    for (int i = 1; i < 6; ++i) {
      vaddps(t, t, cst(kP[i]));
      if (i < 5) vmulps(t, t, xc);
    }
    vmulps(t, t, xc);  // p * r * r + r + 1
    vmulps(t, t, xc);
    vaddps(t, t, xc);
    vaddps(t, t, cst(1.0f));
    vpaddd(ni, ni, bits(uint32_t(kBias)));
    vpslld(ni, ni, 23);  // scale
    vmulps(t, t, ni);
    vmulps(t, t, cst(2.0f));
    vcmpps(w, x, cst(kHi), kGT);
    vblendvps(t, t, bits(0x7F800000u), w);  // +inf above
    vcmpps(w, x, cst(kZeroBelow), kLT);
    vandnps(t, w, t);  // 0 below
    vcmpps(w, x, x, kUnord);
    vblendvps(d, t, x, w);  // NaN passes through
  }

  // vtanh of x into d, using T(0..5); d may be x.
  void tanh(const Ymm& d, const Ymm& x) {
    using namespace tanh_k;
    const Ymm ax = T(4), big = T(5), a = T(0), b = T(1), c = T(2);
    vandps(ax, x, bits(0x7FFFFFFFu));
    vmulps(big, ax, cst(2.0f));
    exp(big, big, 0);
    vaddps(big, big, cst(1.0f));
    vmovaps(a, cst(2.0f));
    vdivps(a, a, big);
    vmovaps(big, cst(1.0f));
    vsubps(big, big, a);
    vxorps(a, big, bits(0x80000000u));
    vcmpps(b, x, cst(0.0f), kLT);
    vblendvps(big, big, a, b);  // x < 0 ? -big : big
    vmulps(a, x, x);            // z
    vmulps(b, a, cst(kP0));
    vaddps(b, b, cst(kP1));
    vmulps(b, b, a);
    vsubps(b, b, cst(kM2));
    vmulps(b, b, a);
    vaddps(b, b, cst(kP3));
    vmulps(b, b, a);
    vsubps(b, b, cst(kM4));
    vmulps(b, b, a);
    vmulps(b, b, x);
    vaddps(b, b, x);  // small
    vcmpps(c, ax, cst(kSmall), kLT);
    vblendvps(d, big, b, c);
  }

 private:
  std::map<uint32_t, Xbyak::Label> consts_;
};

using Emit = void (*)(Gen& g, const Ymm& d, const Ymm* in);

// One sequence per op, each the element function of its tile_f32 (backend/cpu/arithmetic.cpp,
// elementwise_math.cpp, activations.cpp). d may be an input's register: every sequence reads its inputs
// before its last instruction writes d, or only through that instruction.
const std::unordered_map<std::string, Emit>& emitters() {
  static const std::unordered_map<std::string, Emit> m = [] {
    std::unordered_map<std::string, Emit> e;
    Emit add = [](Gen& g, const Ymm& d, const Ymm* in) { g.vaddps(d, in[0], in[1]); };
    Emit sub = [](Gen& g, const Ymm& d, const Ymm* in) { g.vsubps(d, in[0], in[1]); };
    Emit mul = [](Gen& g, const Ymm& d, const Ymm* in) { g.vmulps(d, in[0], in[1]); };
    Emit div = [](Gen& g, const Ymm& d, const Ymm* in) { g.vdivps(d, in[0], in[1]); };
    e["add"] = e["add_"] = add;
    e["sub"] = e["sub_"] = sub;
    e["mul"] = e["mul_"] = mul;
    e["div"] = e["div_"] = div;
    e["neg"] = [](Gen& g, const Ymm& d, const Ymm* in) { g.vxorps(d, in[0], g.bits(0x80000000u)); };
    e["relu"] = [](Gen& g, const Ymm& d, const Ymm* in) {  // a < 0 ? 0 : a (NaN and -0 pass)
      g.vcmpps(Gen::T(0), in[0], g.cst(0.0f), kLT);
      g.vandnps(d, Gen::T(0), in[0]);
    };
    e["sqrt"] = [](Gen& g, const Ymm& d, const Ymm* in) { g.vsqrtps(d, in[0]); };
    e["rsqrt"] = [](Gen& g, const Ymm& d, const Ymm* in) {  // 1 / sqrt(a)
      g.vsqrtps(Gen::T(0), in[0]);
      g.vmovaps(Gen::T(1), g.cst(1.0f));
      g.vdivps(d, Gen::T(1), Gen::T(0));
    };
    e["abs"] = [](Gen& g, const Ymm& d, const Ymm* in) {  // a < 0 ? -a : a (-0 and NaN unchanged)
      g.vcmpps(Gen::T(0), in[0], g.cst(0.0f), kLT);
      g.vxorps(Gen::T(1), in[0], g.bits(0x80000000u));
      g.vblendvps(d, in[0], Gen::T(1), Gen::T(0));
    };
    // (a > b || a != a) ? a : b, and (a < b || a != a) ? a : b: NaN in either propagates
    e["maximum"] = [](Gen& g, const Ymm& d, const Ymm* in) {
      g.vcmpps(Gen::T(0), in[0], in[1], kGT);
      g.vcmpps(Gen::T(1), in[0], in[0], kUnord);
      g.vorps(Gen::T(0), Gen::T(0), Gen::T(1));
      g.vblendvps(d, in[1], in[0], Gen::T(0));
    };
    e["minimum"] = [](Gen& g, const Ymm& d, const Ymm* in) {
      g.vcmpps(Gen::T(0), in[0], in[1], kLT);
      g.vcmpps(Gen::T(1), in[0], in[0], kUnord);
      g.vorps(Gen::T(0), Gen::T(0), Gen::T(1));
      g.vblendvps(d, in[1], in[0], Gen::T(0));
    };
    e["exp"] = [](Gen& g, const Ymm& d, const Ymm* in) { g.exp(d, in[0], 0); };
    e["tanh"] = [](Gen& g, const Ymm& d, const Ymm* in) { g.tanh(d, in[0]); };
    e["sigmoid"] = [](Gen& g, const Ymm& d, const Ymm* in) {  // 1 / (1 + exp(-a))
      const Ymm a = Gen::T(4), one = Gen::T(5);
      g.vxorps(a, in[0], g.bits(0x80000000u));
      g.exp(a, a, 0);
      g.vaddps(a, a, g.cst(1.0f));
      g.vmovaps(one, g.cst(1.0f));
      g.vdivps(d, one, a);
    };
    return e;
  }();
  return m;
}

Emit emitter(const OpDef& op) {
  auto it = emitters().find(op.name);
  return it == emitters().end() ? nullptr : it->second;
}

bool has_avx2() {
  static const bool yes = [] {
    Xbyak::util::Cpu cpu;
    return cpu.has(Xbyak::util::Cpu::tAVX2);
  }();
  return yes;
}

struct NoFit {};  // the kernel needs more registers than there are (or writes a scalar)

// Assembles the loop. rdi: ptrs, rsi: n, rax: byte offset of the iteration, rcx: a slot pointer
// not kept in a register; r8-r11 and rdx keep the first five slots' pointers.
std::shared_ptr<const JitKernel> assemble(std::span<const JitOp> ops, std::span<const JitSlot> slots) {
  using namespace Xbyak::util;
  const size_t n_ops = ops.size();
  // Liveness, backwards: last[i] bit j = input j's last read of that slot's current value;
  // read_after[i] = op i's output is read by a later op.
  std::vector<uint8_t> last(n_ops), read_after(n_ops);
  std::vector<uint8_t> live(slots.size(), 0);
  for (size_t i = n_ops; i-- > 0;) {
    const JitOp& o = ops[i];
    read_after[i] = live[o.out];
    live[o.out] = 0;
    for (uint32_t j = 0; j < o.n_in; ++j)
      if (!live[o.in[j]]) last[i] |= uint8_t(1u << j);
    for (uint32_t j = 0; j < o.n_in; ++j) live[o.in[j]] = 1;
  }

  auto gen = std::make_shared<Gen>();
  Gen& g = *gen;
  const Xbyak::Reg64 kept[] = {r8, r9, r10, r11, rdx};
  std::vector<int> ptr_reg(slots.size(), -1);
  int n_kept = 0;
  auto keep = [&](uint32_t s) {
    if (slots[s] != JitSlot::Scratch && ptr_reg[s] < 0 && n_kept < 5) ptr_reg[s] = n_kept++;
  };
  for (const JitOp& o : ops) {
    for (uint32_t j = 0; j < o.n_in; ++j) keep(o.in[j]);
    keep(o.out);
  }
  for (size_t s = 0; s < slots.size(); ++s)
    if (ptr_reg[s] >= 0) g.mov(kept[ptr_reg[s]], g.ptr[rdi + 8 * s]);
  auto base = [&](uint32_t s) -> Xbyak::Reg64 {
    if (ptr_reg[s] >= 0) return kept[ptr_reg[s]];
    g.mov(rcx, g.ptr[rdi + 8 * s]);
    return rcx;
  };

  Xbyak::Label loop, done;
  g.shl(rsi, 2);  // bytes
  g.xor_(eax, eax);
  g.test(rsi, rsi);
  g.jz(done, Xbyak::CodeGenerator::T_NEAR);
  g.L(loop);
  std::vector<int> reg_of(slots.size(), -1);
  bool used[kValueRegs] = {};
  auto alloc = [&]() -> int {
    for (int r = 0; r < kValueRegs; ++r)
      if (!used[r]) {
        used[r] = true;
        return r;
      }
    throw NoFit{};
  };
  for (size_t i = 0; i < n_ops; ++i) {
    const JitOp& o = ops[i];
    Ymm in[2];
    for (uint32_t j = 0; j < o.n_in; ++j) {
      const uint32_t s = o.in[j];
      if (reg_of[s] < 0) {
        if (slots[s] == JitSlot::Scratch) throw NoFit{};  // read before written: not a chain we know
        reg_of[s] = alloc();
        const Xbyak::Reg64 b = base(s);
        if (slots[s] == JitSlot::Scalar) g.vbroadcastss(Ymm(reg_of[s]), g.ptr[b]);
        else g.vmovups(Ymm(reg_of[s]), g.ptr[b + rax]);
      }
      in[j] = Ymm(reg_of[s]);
    }
    for (uint32_t j = 0; j < o.n_in; ++j) {  // a dying input's register may take the output
      const uint32_t s = o.in[j];
      if ((last[i] >> j & 1u) && reg_of[s] >= 0) {
        used[reg_of[s]] = false;
        reg_of[s] = -1;
      }
    }
    if (reg_of[o.out] >= 0) used[reg_of[o.out]] = false;  // (its old value had no reader left)
    if (slots[o.out] == JitSlot::Scalar) throw NoFit{};
    const int d = alloc();
    emitter(*o.op)(g, Ymm(d), in);
    reg_of[o.out] = d;
    if (slots[o.out] == JitSlot::Full) g.vmovups(g.ptr[base(o.out) + rax], Ymm(d));
    if (!read_after[i]) {
      used[d] = false;
      reg_of[o.out] = -1;
    }
  }
  g.add(rax, 32);
  g.cmp(rax, rsi);
  g.jb(loop, Xbyak::CodeGenerator::T_NEAR);
  g.L(done);
  g.vzeroupper();
  g.ret();
  g.emit_consts();
  g.ready();
  g.setProtectModeRE();
  auto fn = g.getCode<JitKernel::Fn>();
  const size_t bytes = g.getSize();
  return std::make_shared<JitKernel>(std::shared_ptr<void>(gen, &g), fn, bytes);
}

std::atomic<int64_t> g_made{0};

}  // namespace

bool jit_supports(const OpDef& op) { return emitter(op) != nullptr; }

int64_t jit_kernels_made() { return g_made.load(std::memory_order_relaxed); }

std::shared_ptr<const JitKernel> jit_elementwise(std::span<const JitOp> ops, std::span<const JitSlot> slots) {
  if (!has_avx2() || ops.empty()) return nullptr;
  std::string key;
  for (JitSlot s : slots) key += char('0' + int(s));
  for (const JitOp& o : ops) {
    if (!emitter(*o.op) || o.n_in < 1 || o.n_in > 2 || o.out >= slots.size()) return nullptr;
    for (uint32_t j = 0; j < o.n_in; ++j)
      if (o.in[j] >= slots.size()) return nullptr;
    key += '|';
    key += o.op->name;
    for (uint32_t j = 0; j < o.n_in; ++j) key += ',' + std::to_string(o.in[j]);
    key += ':' + std::to_string(o.out);
  }
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const JitKernel>> cache;  // null: cannot be made
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::shared_ptr<const JitKernel> k;
  try {
    k = assemble(ops, slots);
    g_made.fetch_add(1, std::memory_order_relaxed);
  } catch (const NoFit&) {
  } catch (const Xbyak::Error&) {  // code too long, or no executable memory: the tile path runs it
  }
  cache.emplace(std::move(key), k);
  return k;
}

}  // namespace terra::cpu
