#include "terra/compile/fused_elementwise.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "terra/backend/cpu/jit_elementwise.h"
#include "terra/backend/cpu/parallel.h"
#include "terra/compile/passes.h"
#include "terra/core/float_env.h"
#include "terra/core/object_pool.h"

namespace terra::compile {

// Checked one by one: each kernel is a per-element function (no index, no neighbour, no random
// stream) whose vector and tail paths compute the same bits wherever a slice starts.
static const char* const kFusible[] = {
    "add",   "sub",   "mul",   "div",      "add_",    "sub_",    "mul_",    "div_",      "neg",     "exp",
    "log",   "sqrt",  "rsqrt", "abs",      "sign",    "relu",    "leaky_relu", "gelu",  "gelu_backward",
    "sigmoid", "tanh", "softplus", "pow",  "pow_scalar", "clamp", "maximum", "minimum", "where",  "masked_fill",
    "cast",
};

bool fusible_elementwise(const OpDef& op) {
  if (!op.has(kElementwise) || op.has(kRandom) || op.has(kStateful) || op.has(kView) || !op.kernel) return false;
  for (const char* n : kFusible)
    if (std::strcmp(n, op.name) == 0) return true;
  return false;
}

bool fusible_elementwise(const OpDef& op, DType dtype) {
  if (!fusible_elementwise(op)) return false;
  return !op.check_values || is_floating(dtype);
}

std::string FusedKernel::signature() const {
  std::string s;
  for (const FusedOp& o : ops) {
    s += (s.empty() ? "%" : " %") + std::to_string(o.out) + "=" + o.op->name + "(";
    for (size_t i = 0; i < o.in.size(); ++i) s += (i ? ",%" : "%") + std::to_string(o.in[i]);
    s += ")";
  }
  return s;
}

std::string FusedKernel::describe() const {
  return "fused[" + std::to_string(numel) + "]: " + signature();
}

// One worker's views of the slots: full-size slots become [len] slices moved along tile by tile,
// scalars stay 0-d, scratch slots own a tile-sized buffer. Built once per worker and kernel, then
// rebound to each run's slots.
struct TileViews {
  std::vector<Tensor> views;
  std::vector<int64_t> base;  // full-size slots: the slot's own offset (-1: not full-size)
  std::vector<std::vector<Tensor>> ins;
  std::vector<Tensor> outs;

  explicit TileViews(const FusedKernel& k) {
    const size_t n = k.slot_dtype.size();
    views.resize(n);
    base.assign(n, -1);
    for (size_t s = 0; s < n; ++s) {
      auto v = make_pooled<TensorImpl>();
      v->dtype = k.slot_dtype[s];
      views[s] = Tensor(std::move(v));
    }
    ins.resize(k.ops.size());
    outs.resize(k.ops.size());
    for (size_t i = 0; i < k.ops.size(); ++i) {
      for (uint32_t s : k.ops[i].in) ins[i].push_back(views[s]);
      outs[i] = views[k.ops[i].out];
    }
  }

  void bind(const FusedKernel& k, std::span<const Tensor> slots) {
    for (size_t s = 0; s < views.size(); ++s) {
      TensorImpl& v = *views[s].impl();
      const Tensor& t = slots[s];
      base[s] = -1;
      if (t.defined() && t.impl()->numel == 1 && k.numel != 1) {
        v.shape.clear();
        v.strides.clear();
        v.numel = 1;
        v.offset = t.impl()->offset;
        v.storage = t.impl()->storage;
        continue;
      }
      v.shape = {0};
      v.strides = {1};
      v.numel = 0;
      v.offset = 0;
      if (t.defined()) {
        v.storage = t.impl()->storage;
        base[s] = t.impl()->offset;
      } else if (!v.storage) {  // scratch: kept across runs (release() drops only the run's tensors)
        v.storage = make_pooled<Storage>(size_t(kFusedTile) * itemsize(v.dtype));
      }
    }
  }

  void release() {  // drops the run's tensors (kept scratch stays)
    for (size_t s = 0; s < views.size(); ++s)
      if (base[s] >= 0 || views[s].impl()->shape.empty()) views[s].impl()->storage.reset();
  }

  void at(int64_t begin, int64_t len) {
    for (size_t s = 0; s < views.size(); ++s) {
      TensorImpl& v = *views[s].impl();
      if (v.shape.empty()) continue;  // a scalar
      v.shape[0] = len;
      v.numel = len;
      if (base[s] >= 0) v.offset = base[s] + begin;
    }
  }
};

TileViewsPool::TileViewsPool() = default;
TileViewsPool::TileViewsPool(const TileViewsPool&) {}
TileViewsPool& TileViewsPool::operator=(const TileViewsPool&) { return *this; }
TileViewsPool::~TileViewsPool() = default;

std::unique_ptr<TileViews> TileViewsPool::take() {
  std::lock_guard<std::mutex> g(mu_);
  if (free_.empty()) return nullptr;
  std::unique_ptr<TileViews> v = std::move(free_.back());
  free_.pop_back();
  return v;
}

void TileViewsPool::give(std::unique_ptr<TileViews> v) {
  std::lock_guard<std::mutex> g(mu_);
  free_.push_back(std::move(v));
}

namespace {

// The flat path: when every op has a float32 tile function and every slot is float32, a tile runs
// those functions on raw slices (no kernel call, no tensor views per op and tile), each op its own
// loop over the tile. Where it can, the flat path runs generated code instead (jit_for): whole
// vectors with every value in registers, the tile loop only for a range's last few elements.
constexpr size_t kFlatMaxSlots = 64;  // the slot table lives on the caller's stack

bool flat(const FusedKernel& k) {
  if (k.slot_dtype.size() > kFlatMaxSlots) return false;
  for (DType d : k.slot_dtype)
    if (d != DType::Float32) return false;
  for (const FusedOp& o : k.ops)
    if (!o.op->tile_f32 || o.in.empty() || o.in.size() > 2) return false;
  return true;
}

// Floats per scratch slice: 2 KB, so a group's scratch stays in L1 while a tile runs its ops
// (512 measured faster than 256, 1024 and 4096 on bench/fusion_bench's chain).
constexpr int64_t kFlatTile = 512;

struct FlatSlot {
  enum Kind : uint8_t { Full, Scalar, Scratch } kind = Scratch;
  float* base = nullptr;  // Full, Scalar: the slot's element 0
  int64_t scratch = 0;    // Scratch: its slice in the worker's buffer
};

// Generated code for `k` over these slots, or null (pass off, no code for its ops, or a written
// slot overlapping another: the tile loop reads its operands op by op, the code once per vector).
std::shared_ptr<const cpu::JitKernel> jit_for(const FusedKernel& k, const FlatSlot* info, size_t n_slots) {
  if (!pass_enabled(Pass::JitElementwise)) return nullptr;
  const int64_t bytes = k.numel * int64_t(sizeof(float));
  for (const FusedOp& o : k.ops) {
    const FlatSlot& w = info[o.out];
    if (w.kind != FlatSlot::Full) continue;
    for (size_t s = 0; s < n_slots; ++s) {
      if (s == o.out || info[s].kind == FlatSlot::Scratch) continue;
      const char* a = reinterpret_cast<const char*>(w.base);
      const char* b = reinterpret_cast<const char*>(info[s].base);
      const int64_t len = info[s].kind == FlatSlot::Full ? bytes : int64_t(sizeof(float));
      if (a < b + len && b < a + bytes) return nullptr;
    }
  }
  uint8_t kinds[kFlatMaxSlots];
  for (size_t s = 0; s < n_slots; ++s) kinds[s] = uint8_t(info[s].kind);
  return k.jit.get(std::span<const uint8_t>(kinds, n_slots), [&] {
    std::vector<cpu::JitOp> ops;
    std::vector<cpu::JitSlot> sl;
    for (const FusedOp& o : k.ops) {
      cpu::JitOp j{o.op, {o.in[0], o.in.size() > 1 ? o.in[1] : 0}, uint32_t(o.in.size()), o.out};
      ops.push_back(j);
    }
    for (size_t s = 0; s < n_slots; ++s)
      sl.push_back(info[s].kind == FlatSlot::Full     ? cpu::JitSlot::Full
                   : info[s].kind == FlatSlot::Scalar ? cpu::JitSlot::Scalar
                                                      : cpu::JitSlot::Scratch);
    return cpu::jit_elementwise(ops, sl);
  });
}

void run_flat(const FusedKernel& k, std::span<const Tensor> slots) {
  FlatSlot info[kFlatMaxSlots];  // the caller's; workers read it during the loop
  int64_t n_scratch = 0;
  for (size_t s = 0; s < slots.size(); ++s) {
    if (!slots[s].defined()) {
      info[s].scratch = n_scratch++;
      continue;
    }
    TensorImpl& t = *slots[s].impl();
    info[s].kind = t.numel == 1 && k.numel != 1 ? FlatSlot::Scalar : FlatSlot::Full;
    info[s].base = t.data_as<float>();  // pending values exist before any worker reads them
  }
  const FlatSlot* slot = info;
  const size_t n_slots = slots.size();
  const std::shared_ptr<const cpu::JitKernel> jit = jit_for(k, info, n_slots);
  cpu::parallel_for(k.numel, cpu::kGrain, [&](int64_t b, int64_t e) {
    if (jit) {  // whole vectors in generated code; the last few elements by the tile loop below
      const int64_t m = (e - b) / cpu::kJitWidth * cpu::kJitWidth;
      float* ptrs[kFlatMaxSlots];
      for (size_t s = 0; s < n_slots; ++s)
        ptrs[s] = slot[s].kind == FlatSlot::Full ? slot[s].base + b : slot[s].base;
      if (m > 0) (*jit)(ptrs, m);
      b += m;
      if (b == e) return;
    }
    thread_local std::vector<float> scratch;
    if (scratch.size() < size_t(n_scratch * kFlatTile)) scratch.resize(size_t(n_scratch * kFlatTile));
    for (int64_t t = b; t < e; t += kFlatTile) {
      auto at = [&](uint32_t s) -> float* {
        const FlatSlot& f = slot[s];
        if (f.kind == FlatSlot::Full) return f.base + t;
        return f.kind == FlatSlot::Scalar ? f.base : scratch.data() + f.scratch * kFlatTile;
      };
      TileArgs a;
      a.n = std::min(kFlatTile, e - t);
      for (const FusedOp& o : k.ops) {
        for (size_t j = 0; j < o.in.size(); ++j) {
          a.in[j] = at(o.in[j]);
          a.step[j] = slot[o.in[j]].kind == FlatSlot::Scalar ? 0 : 1;
        }
        a.out = at(o.out);
        o.op->tile_f32(a);
      }
    }
  });
}

}  // namespace

void run_fused(const FusedKernel& k, std::span<const Tensor> slots) {
  KernelFloatEnv fe;  // as every kernel (core/float_env.h)
  if (flat(k)) return run_flat(k, slots);
  for (const Tensor& t : slots)
    if (t.defined()) t.impl()->data();  // pending values exist before any worker reads them
  cpu::parallel_for(k.numel, cpu::kGrain, [&](int64_t b, int64_t e) {
    std::unique_ptr<TileViews> tv = k.views.take();
    if (!tv) tv = std::make_unique<TileViews>(k);
    tv->bind(k, slots);
    struct Back {  // the views go back to the pool, their run's tensors dropped, even if a kernel throws
      const FusedKernel& k;
      std::unique_ptr<TileViews>& tv;
      ~Back() {
        tv->release();
        k.views.give(std::move(tv));
      }
    } back{k, tv};
    for (int64_t t = b; t < e; t += kFusedTile) {
      const int64_t len = std::min(kFusedTile, e - t);
      tv->at(t, len);
      for (size_t i = 0; i < k.ops.size(); ++i) {
        std::span<Tensor> out(&tv->outs[i], 1);
        k.ops[i].op->kernel(KernelArgs{tv->ins[i], out, *k.ops[i].attrs, PhiloxKey{}});
      }
    }
  });
}

}  // namespace terra::compile
