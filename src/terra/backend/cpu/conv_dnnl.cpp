// float32 convolutions on oneDNN. terra's tensors are plain NCHW/OIHW; on those oneDNN only has
// gemm:jit (im2col + sgemm), 2-4x slower than its direct jit kernels on blocked layouts even when
// the reorders in and out are paid on every call (bench/kernels_bench.cpp, BM_ConvPass*). So each
// call reorders its operands into the layouts a format_tag::any primitive asks for, runs it, and
// reorders the result back, all on the thread that runs the call; use_blocked says where not to.
#include "terra/backend/cpu/conv_dnnl.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <vector>

#include "terra/backend/cpu/dnnl_common.h"
#include "terra/backend/cpu/loops.h"
#include "terra/core/threads.h"

namespace terra::kernels::conv_dnnl {
namespace {

namespace dn = cpu::onednn;
using dnnl::memory;

std::atomic<int> g_layout{int(Layout::Auto)};

bool blocked_for(Pass p, const Geo& g) {
  Layout l = Layout(g_layout.load(std::memory_order_relaxed));
  return l == Layout::Auto ? use_blocked(p, g) : l == Layout::Blocked;
}

struct Descs {
  memory::desc src, wei, dst, bias;
  memory::dims strides, dil, padl, padr;
};

// any: src, weights and dst as format_tag::any (the primitive picks); else terra's plain layouts.
Descs descs(const Geo& g, bool any) {
  auto md = [&](const memory::dims& dims) {
    return any ? memory::desc(dims, memory::data_type::f32, memory::format_tag::any) : dn::plain_f32(dims);
  };
  Descs d;
  d.src = md({g.N, g.C, g.H, g.W});
  d.dst = md({g.N, g.O, g.OH, g.OW});
  d.wei = g.G == 1 ? md({g.O, g.C, g.KH, g.KW}) : md({g.G, g.O / g.G, g.C / g.G, g.KH, g.KW});
  d.bias = dn::plain_f32({g.O});
  d.strides = {g.sh, g.sw};
  d.dil = {g.dh - 1, g.dw - 1};
  d.padl = {g.ph, g.pw};
  // oneDNN wants the exact right padding that produces OH (torch floors the division instead).
  d.padr = {(g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1 - g.H - g.ph,
            (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1 - g.W - g.pw};
  return d;
}

dnnl::convolution_forward::primitive_desc fwd_pd(const Descs& d, bool bias) {
  using cf = dnnl::convolution_forward;
  auto desc = bias ? cf::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, d.src, d.wei,
                              d.bias, d.dst, d.strides, d.dil, d.padl, d.padr)
                   : cf::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, d.src, d.wei,
                              d.dst, d.strides, d.dil, d.padl, d.padr);
  return cf::primitive_desc(desc, dn::user_scratchpad_attr(), dn::engine());
}

// One tensor of a call: terra's plain layout, the primitive's, and the reorder between them
// (user -> inner for inputs, inner -> user for the output); none when the two agree.
struct Operand {
  memory::desc user, inner;
  bool reordered = false;
  dnnl::primitive reorder;
  dnnl::reorder::primitive_desc rpd;
  size_t bytes() const { return reordered ? dn::aligned64(inner.get_size()) : 0; }
};

// The primitives of one single-threaded call. Operands: forward (src, weights, dst), backward
// data (diff_dst, weights, diff_src), backward weights (diff_dst, src, diff_weights).
struct Plan {
  dnnl::primitive conv;
  dnnl::primitive_desc pd;
  Operand in0, in1, out;
  int arg0, arg1, arg_out;
  memory::desc bias;  // forward with bias: the bias operand's descriptor
  size_t pad = 0;  // scratchpad bytes: the largest of the conv's and the reorders'
};

Operand operand(const memory::desc& user, const memory::desc& inner, bool input) {
  Operand o;
  o.user = user, o.inner = inner;
  if (user == inner) return o;
  o.reordered = true;
  o.rpd = input ? dnnl::reorder::primitive_desc(dn::engine(), user, dn::engine(), inner, dn::user_scratchpad_attr())
                : dnnl::reorder::primitive_desc(dn::engine(), inner, dn::engine(), user, dn::user_scratchpad_attr());
  o.reorder = dnnl::reorder(o.rpd);
  return o;
}

Plan make_plan(Pass p, const Geo& g, bool bias, bool blocked) {
  Descs d = descs(g, blocked), u = descs(g, false);
  Plan pl;
  if (p == Pass::Fwd) {
    auto pd = fwd_pd(d, bias);
    pl.conv = dnnl::convolution_forward(pd);
    pl.pd = pd;
    pl.in0 = operand(u.src, pd.src_desc(), true);
    pl.in1 = operand(u.wei, pd.weights_desc(), true);
    pl.out = operand(u.dst, pd.dst_desc(), false);
    pl.arg0 = DNNL_ARG_SRC, pl.arg1 = DNNL_ARG_WEIGHTS, pl.arg_out = DNNL_ARG_DST;
    if (bias) pl.bias = pd.bias_desc();
  } else if (p == Pass::BwdData) {
    using cb = dnnl::convolution_backward_data;
    cb::desc desc(dnnl::algorithm::convolution_direct, d.src, d.wei, d.dst, d.strides, d.dil, d.padl, d.padr);
    cb::primitive_desc pd(desc, dn::user_scratchpad_attr(), dn::engine(), fwd_pd(d, false));
    pl.conv = cb(pd);
    pl.pd = pd;
    pl.in0 = operand(u.dst, pd.diff_dst_desc(), true);
    pl.in1 = operand(u.wei, pd.weights_desc(), true);
    pl.out = operand(u.src, pd.diff_src_desc(), false);
    pl.arg0 = DNNL_ARG_DIFF_DST, pl.arg1 = DNNL_ARG_WEIGHTS, pl.arg_out = DNNL_ARG_DIFF_SRC;
  } else {
    using cb = dnnl::convolution_backward_weights;
    cb::desc desc(dnnl::algorithm::convolution_direct, d.src, d.wei, d.dst, d.strides, d.dil, d.padl, d.padr);
    cb::primitive_desc pd(desc, dn::user_scratchpad_attr(), dn::engine(), fwd_pd(d, false));
    pl.conv = cb(pd);
    pl.pd = pd;
    pl.in0 = operand(u.dst, pd.diff_dst_desc(), true);
    pl.in1 = operand(u.src, pd.src_desc(), true);
    pl.out = operand(u.wei, pd.diff_weights_desc(), false);
    pl.arg0 = DNNL_ARG_DIFF_DST, pl.arg1 = DNNL_ARG_SRC, pl.arg_out = DNNL_ARG_DIFF_WEIGHTS;
  }
  pl.pad = pl.pd.scratchpad_desc().get_size();
  for (const Operand* o : {&pl.in0, &pl.in1, &pl.out})
    if (o->reordered) pl.pad = std::max(pl.pad, o->rpd.scratchpad_desc().get_size());
  pl.pad = dn::aligned64(pl.pad);
  return pl;
}

// A tag no other kernel's key starts with (the cache is shared by all oneDNN kernels).
constexpr int64_t kPlanTag = 0x436f6e76;  // "Conv"

// Cached per pass, bias, layout and (slice) geometry: no primitive is created in steady state.
std::shared_ptr<const Plan> plan(Pass p, const Geo& g, bool bias = false) {
  const bool blocked = blocked_for(p, g);
  dn::Key key{kPlanTag, int64_t(p), bias, blocked, g.N, g.C, g.H, g.W, g.O, g.KH, g.KW, g.OH, g.OW, g.G,
              g.sh, g.sw, g.ph, g.pw, g.dh, g.dw};
  return dn::cached_as<Plan>(key, [&] { return make_plan(p, g, bias, blocked); });
}

// Input operands go user -> inner, the output inner -> user.
void reorder_in(const Operand& o, const void* user, void* inner, void* pad) {
  dn::execute(o.reorder, o.rpd, {{DNNL_ARG_FROM, o.user, user}, {DNNL_ARG_TO, o.inner, inner}}, pad);
}
void reorder_out(const Operand& o, const void* inner, void* user, void* pad) {
  dn::execute(o.reorder, o.rpd, {{DNNL_ARG_FROM, o.inner, inner}, {DNNL_ARG_TO, o.user, user}}, pad);
}

// One call on this thread: reorders in0 (and in1 unless `in1_inner` holds it reordered already),
// runs the conv, and reorders its result into `out`, unless `out_inner` is given: then the
// result stays in the primitive's layout there.
void run(const Plan& pl, const float* in0, const float* in1, const float* in1_inner, const float* bias, float* out,
         float* out_inner = nullptr) {
  const bool local1 = pl.in1.reordered && !in1_inner, local_out = pl.out.reordered && !out_inner;
  dn::Scratch sc(pl.in0.bytes() + (local1 ? pl.in1.bytes() : 0) + (local_out ? pl.out.bytes() : 0) + pl.pad);
  char* at = sc.data();
  auto carve = [&](size_t n) { char* p = at; at += n; return p; };
  char* b0 = carve(pl.in0.bytes());
  char* b1 = carve(local1 ? pl.in1.bytes() : 0);
  char* bo = carve(local_out ? pl.out.bytes() : 0);
  void* pad = pl.pad ? at : nullptr;

  // Each operand as the conv reads it: its descriptor and data (reordered into `buf` if need be).
  auto input = [&](const Operand& o, const float* user, char* buf) -> const void* {
    if (!o.reordered) return user;
    reorder_in(o, user, buf, pad);
    return buf;
  };
  const void* d0 = input(pl.in0, in0, b0);
  const void* d1 = pl.in1.reordered && in1_inner ? in1_inner : input(pl.in1, in1, b1);
  void* dout = !pl.out.reordered ? static_cast<void*>(out) : out_inner ? static_cast<void*>(out_inner) : bo;
  const memory::desc& md0 = pl.in0.reordered ? pl.in0.inner : pl.in0.user;
  const memory::desc& md1 = pl.in1.reordered ? pl.in1.inner : pl.in1.user;
  const memory::desc& mdo = pl.out.reordered ? pl.out.inner : pl.out.user;
  if (bias)
    dn::execute(pl.conv, pl.pd, {{pl.arg0, md0, d0}, {pl.arg1, md1, d1}, {pl.arg_out, mdo, dout}, {DNNL_ARG_BIAS, pl.bias, bias}},
                pad);
  else
    dn::execute(pl.conv, pl.pd, {{pl.arg0, md0, d0}, {pl.arg1, md1, d1}, {pl.arg_out, mdo, dout}}, pad);
  if (local_out) reorder_out(pl.out, dout, out, pad);
}

// Multiply-adds below which a conv stays one oneDNN call on the calling thread.
constexpr int64_t kSplitMacs = int64_t(1) << 18;

// The batch split: slices of `bs` images (the last may be shorter), one single-threaded oneDNN
// call each on terra's pool (images are independent in forward and backward-data). The slices
// depend only on the shapes and num_threads(), so every mode computes the same bits.
struct Split {
  int64_t bs, parts;
  Geo slice(const Geo& g, int64_t p) const {
    Geo s = g;
    s.N = std::min(g.N, (p + 1) * bs) - p * bs;
    return s;
  }
};

Split split_of(const Geo& g) {
  const int threads = num_threads();
  const int64_t macs = g.N * g.O * g.OH * g.OW * (g.C / g.G) * g.KH * g.KW;
  if (threads <= 1 || g.N < 2 || macs < kSplitMacs) return {g.N, 1};
  const int64_t bs = (g.N + threads - 1) / threads;
  return {bs, (g.N + bs - 1) / bs};
}

template <class F>
void over_slices(const Split& s, F&& f) {
  if (s.parts == 1) return f(int64_t(0));
  cpu::parallel_for(s.parts, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) f(p);
  });
}

// Forward and backward-data: x-like input sliced by image, weights shared. The weights are
// reordered once per call (not per slice) when the slices' primitives agree on their layout.
void sliced(Pass pass, const Geo& g, const float* in0, int64_t in0_image, const float* w, const float* bias, float* out,
            int64_t out_image) {
  const Split s = split_of(g);
  auto first = plan(pass, s.slice(g, 0), bias != nullptr);
  auto last = s.parts > 1 ? plan(pass, s.slice(g, s.parts - 1), bias != nullptr) : first;
  std::unique_ptr<dn::Scratch> wbuf;
  if (first->in1.reordered) {
    wbuf = std::make_unique<dn::Scratch>(first->in1.bytes() + first->pad);
    reorder_in(first->in1, w, wbuf->data(), first->pad ? wbuf->data() + first->in1.bytes() : nullptr);
  }
  const float* w_inner = wbuf ? reinterpret_cast<const float*>(wbuf->data()) : nullptr;
  over_slices(s, [&](int64_t p) {
    const Plan& pl = p + 1 < s.parts ? *first : *last;
    const float* shared = &pl == first.get() || pl.in1.inner == first->in1.inner ? w_inner : nullptr;
    run(pl, in0 + p * s.bs * in0_image, w, shared, bias, out + p * s.bs * out_image);
  });
}

}  // namespace

// The measured rule (kernels_bench BM_ConvPass, the programs' shapes on 2 threads, reorders
// counted): blocked won 1.2-3.4x for KxK kernels doing 100K+ multiply-adds per call. Plain stays:
// below 100K (the reorders cost what the jit kernel saves); 1x1 kernels (plain is already a bare
// sgemm, blocked ran 0.6-1.2x); the input gradient with < 8 input channels per group (0.8-0.9x)
// and the weight gradient with 1 (0.35-0.65x): the jit kernels have no fast path for them.
constexpr int64_t kBlockedMacs = 100000;
bool use_blocked(Pass p, const Geo& g) {
  const int64_t cg = g.C / g.G;
  if (g.KH * g.KW == 1 || g.N * g.O * g.OH * g.OW * cg * g.KH * g.KW < kBlockedMacs) return false;
  if (p == Pass::BwdData) return cg >= 8;
  if (p == Pass::BwdWeights) return cg > 1;
  return true;
}

void set_layout(Layout l) { g_layout.store(int(l), std::memory_order_relaxed); }
Layout layout() { return Layout(g_layout.load(std::memory_order_relaxed)); }

std::string describe(Pass p, const Geo& g) {
  auto pl = plan(p, split_of(g).slice(g, 0));
  bool reordered = pl->in0.reordered || pl->in1.reordered || pl->out.reordered;
  return std::string(reordered ? "blocked " : "plain ") + pl->pd.impl_info_str();
}

void forward(const Geo& g, const float* x, const float* w, const float* b, float* y) {
  sliced(Pass::Fwd, g, x, g.C * g.H * g.W, w, b, y, g.O * g.OH * g.OW);
}

void backward_data(const Geo& g, const float* gy, const float* w, float* gx) {
  sliced(Pass::BwdData, g, gy, g.O * g.OH * g.OW, w, nullptr, gx, g.C * g.H * g.W);
}

// The weight gradient sums over images: each slice computes its own partial gradient, then the
// partials are added in slice order, so the sum is fixed too. When every slice's primitive writes
// the same blocked layout, the partials are summed in it and reordered to OIHW once.
void backward_weights(const Geo& g, const float* gy, const float* x, float* gw) {
  const Split s = split_of(g);
  const int64_t in0_image = g.O * g.OH * g.OW, in1_image = g.C * g.H * g.W;
  if (s.parts == 1) return run(*plan(Pass::BwdWeights, g), gy, x, nullptr, nullptr, gw);
  auto first = plan(Pass::BwdWeights, s.slice(g, 0)), last = plan(Pass::BwdWeights, s.slice(g, s.parts - 1));
  const bool inner = first->out.reordered && last->out.reordered && first->out.inner == last->out.inner;
  // Floats per partial: the primitive's layout (padded blocks included) or OIHW.
  const int64_t wsize = inner ? int64_t(first->out.inner.get_size() / sizeof(float)) : g.O * (g.C / g.G) * g.KH * g.KW;
  const size_t part_bytes = dn::aligned64(size_t(wsize) * sizeof(float));
  dn::Scratch partials(part_bytes * size_t(inner ? s.parts : s.parts - 1) + (inner ? first->pad : 0));
  auto partial = [&](int64_t p) { return reinterpret_cast<float*>(partials.data() + size_t(p) * part_bytes); };
  // Without the shared layout, slice 0 writes gw itself and slice p > 0 partial(p - 1).
  float* sum = inner ? partial(0) : gw;
  auto part_of = [&](int64_t p) { return inner ? partial(p) : p == 0 ? gw : partial(p - 1); };
  over_slices(s, [&](int64_t p) {
    const Plan& pl = p + 1 < s.parts ? *first : *last;
    const float* a = gy + p * s.bs * in0_image;
    const float* b = x + p * s.bs * in1_image;
    if (inner) run(pl, a, b, nullptr, nullptr, nullptr, part_of(p));
    else run(pl, a, b, nullptr, nullptr, part_of(p));
  });
  cpu::parallel_for(wsize, cpu::kGrain, [&](int64_t b, int64_t e) {
    for (int64_t p = 1; p < s.parts; ++p) {
      const float* q = part_of(p);
      for (int64_t i = b; i < e; ++i) sum[i] += q[i];
    }
  });
  if (inner)
    reorder_out(first->out, sum, gw, first->pad ? partials.data() + part_bytes * size_t(s.parts) : nullptr);
}

}  // namespace terra::kernels::conv_dnnl
