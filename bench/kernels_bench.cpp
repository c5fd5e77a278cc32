// Kernel throughput against oneDNN called directly in the same binary.
//
//   BM_MatmulTerra/n    terra::matmul of two n x n float32 tensors (dispatch, allocation, sgemm)
//   BM_MatmulSgemm/n    dnnl_sgemm on the same sizes into a preallocated C
//   BM_ConvTerra/i      nn::functional::conv2d (no bias) on ResNet-like shape i (kConvShapes)
//   BM_ConvDnnlPlain/i  a oneDNN convolution_forward primitive on plain NCHW/OIHW memory, created
//                       once and executed in the loop (terra's layout, so this is terra's ceiling)
//   BM_ConvDnnlAny/i    the same with format_tag::any (oneDNN picks blocked layouts; reorders of
//                       inputs/outputs are NOT counted, so this is an upper bound for any layout)
//   BM_ConvPass/l/i/p   terra's conv op with layout l (0 plain NCHW as before, 1 terra's rule:
//                       blocked where it wins, reorders counted) on shape i of kPassShapes (the
//                       programs' shapes, quick then full size), pass p (0 forward, 1 input
//                       gradient, 2 weight gradient); end to end through dispatch on terra's threads.
//                       The label says what ran. Plain and rule alternate, for a noisy machine.
//
// Wall-clock time (UseRealTime: oneDNN may run on two threads). Counter FLOPS = 2*M*N*K (matmul) or 2*N*O*OH*OW*C*KH*KW (conv) per second. Thread count comes
// from OMP_NUM_THREADS (terra and oneDNN share libgomp's pool).
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include <terra/terra.h>

#include "terra/backend/cpu/conv_dnnl.h"

using namespace terra;

namespace {

void BM_MatmulTerra(benchmark::State& state) {
  const int64_t n = state.range(0);
  manual_seed(0);
  Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatmulTerra)->Arg(256)->Arg(512)->Arg(1024)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_MatmulSgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = float(i % 17) * 0.1f - 0.8f;
    b[i] = float(i % 13) * 0.1f - 0.6f;
  }
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatmulSgemm)->Arg(256)->Arg(512)->Arg(1024)->UseRealTime()->Unit(benchmark::kMicrosecond);

struct ConvShape {
  const char* name;
  int64_t n, c, h, w, o, k, stride, pad;
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
  double flops() const { return 2.0 * double(n * o * oh() * ow() * c * k * k); }
};

// Batch 4: ResNet-18/50 layers at sizes a 2-core CPU trains on.
const ConvShape kConvShapes[] = {
    {"stem7x7s2_3to64_112", 4, 3, 112, 112, 64, 7, 2, 3},
    {"3x3_64to64_56", 4, 64, 56, 56, 64, 3, 1, 1},
    {"3x3_128to128_28", 4, 128, 28, 28, 128, 3, 1, 1},
    {"3x3s2_128to256_28", 4, 128, 28, 28, 256, 3, 2, 1},
    {"1x1_256to64_28", 4, 256, 28, 28, 64, 1, 1, 0},
};
constexpr int kNumConv = int(sizeof(kConvShapes) / sizeof(kConvShapes[0]));

void BM_ConvTerra(benchmark::State& state) {
  const ConvShape& s = kConvShapes[state.range(0)];
  state.SetLabel(s.name);
  manual_seed(0);
  Tensor x = randn({s.n, s.c, s.h, s.w}), w = randn({s.o, s.c, s.k, s.k}) * 0.05;
  for (auto _ : state) {
    Tensor y = nn::functional::conv2d(x, w, {}, s.stride, s.pad);
    benchmark::DoNotOptimize(y.impl());
  }
  state.counters["FLOPS"] = benchmark::Counter(s.flops(), benchmark::Counter::kIsIterationInvariantRate);
}

void conv_dnnl(benchmark::State& state, bool any) {
  using namespace dnnl;
  using tag = memory::format_tag;
  const ConvShape& s = kConvShapes[state.range(0)];
  state.SetLabel(s.name);
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  memory::dims src_d{s.n, s.c, s.h, s.w}, wei_d{s.o, s.c, s.k, s.k}, dst_d{s.n, s.o, s.oh(), s.ow()};
  memory::dims strides{s.stride, s.stride}, pad{s.pad, s.pad};
  memory::dims padr{(s.oh() - 1) * s.stride + s.k - s.h - s.pad, (s.ow() - 1) * s.stride + s.k - s.w - s.pad};
  auto dt = memory::data_type::f32;
  memory::desc src_md(src_d, dt, any ? tag::any : tag::nchw), wei_md(wei_d, dt, any ? tag::any : tag::oihw),
      dst_md(dst_d, dt, any ? tag::any : tag::nchw);
  convolution_forward::desc desc(prop_kind::forward_training, algorithm::convolution_direct, src_md, wei_md, dst_md,
                                 strides, pad, padr);
  convolution_forward::primitive_desc pd(desc, eng);
  memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
  // Values do not matter for speed, but avoid denormals.
  for (memory* m : {&src, &wei}) {
    float* p = static_cast<float*>(m->get_data_handle());
    size_t cnt = m->get_desc().get_size() / sizeof(float);
    for (size_t i = 0; i < cnt; ++i) p[i] = float(i % 7) * 0.01f;
  }
  convolution_forward conv(pd);
  for (auto _ : state) {
    conv.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    strm.wait();
  }
  state.counters["FLOPS"] = benchmark::Counter(s.flops(), benchmark::Counter::kIsIterationInvariantRate);
}
void BM_ConvDnnlPlain(benchmark::State& state) { conv_dnnl(state, false); }
void BM_ConvDnnlAny(benchmark::State& state) { conv_dnnl(state, true); }

// The shapes terra's programs run (terra-bench --quick, then full size), batch as they use it.
const ConvShape kPassShapes[] = {
    {"resnet_stem", 8, 3, 8, 8, 16, 3, 1, 1},       {"resnet_16_8", 8, 16, 8, 8, 16, 3, 1, 1},
    {"resnet_down", 8, 16, 8, 8, 32, 3, 2, 1},      {"resnet_proj1x1", 8, 16, 8, 8, 32, 1, 2, 0},
    {"resnet_32_4", 8, 32, 4, 4, 32, 3, 1, 1},      {"yolo_stem", 8, 3, 16, 16, 16, 3, 1, 1},
    {"yolo_down16", 8, 16, 16, 16, 32, 3, 2, 1},    {"yolo_64_4", 8, 64, 4, 4, 32, 3, 1, 1},
    {"yolo_64_2", 8, 64, 2, 2, 64, 3, 1, 1},        {"yolo_head1x1", 8, 32, 4, 4, 7, 1, 1, 0},
    {"sdpoint_32_2", 8, 32, 2, 2, 32, 3, 1, 1},     {"dcgan_d1", 16, 1, 8, 8, 16, 4, 2, 1},
    {"dcgan_d2_up1", 16, 16, 4, 4, 32, 4, 2, 1},    {"frcnn_stem", 2, 3, 16, 16, 16, 3, 1, 1},
    {"frcnn_down", 2, 16, 16, 16, 32, 3, 2, 1},     {"full_resnet_24_16", 16, 24, 16, 16, 24, 3, 1, 1},
    {"full_resnet_48_8", 16, 48, 8, 8, 48, 3, 1, 1}, {"full_yolo_stem", 16, 3, 32, 32, 16, 3, 1, 1},
    {"full_yolo_64_8", 16, 64, 8, 8, 64, 3, 1, 1},  {"full_dcgan_up1", 16, 32, 8, 8, 64, 4, 2, 1},
    {"full_frcnn_down", 4, 32, 32, 32, 64, 3, 2, 1}, {"full_dcgan_d1", 16, 1, 16, 16, 32, 4, 2, 1},
    {"full_yolo_head1x1", 16, 32, 8, 8, 7, 1, 1, 0}, {"full_resnet_proj1x1", 16, 24, 16, 16, 48, 1, 2, 0},
};
constexpr int kNumPass = int(sizeof(kPassShapes) / sizeof(kPassShapes[0]));

void BM_ConvPass(benchmark::State& state) {
  namespace cd = terra::kernels::conv_dnnl;
  const cd::Layout layout = state.range(0) ? cd::Layout::Auto : cd::Layout::Plain;
  const ConvShape& s = kPassShapes[state.range(1)];
  const int pass = int(state.range(2));
  manual_seed(0);
  Tensor x = randn({s.n, s.c, s.h, s.w}), w = randn({s.o, s.c, s.k, s.k}) * 0.05,
         gy = randn({s.n, s.o, s.oh(), s.ow()});
  const Int2 st{s.stride, s.stride}, pad{s.pad, s.pad}, dil{1, 1};
  cd::set_layout(layout);
  cd::Geo g{s.n, s.c, s.h, s.w, s.o, s.k, s.k, s.oh(), s.ow(), 1, s.stride, s.stride, s.pad, s.pad, 1, 1};
  state.SetLabel(std::string(s.name) + " " + cd::describe(cd::Pass(pass), g));
  for (auto _ : state) {
    Tensor r = pass == 0   ? nn::functional::conv2d(x, w, {}, s.stride, s.pad)
               : pass == 1 ? conv2d_backward_input(gy, w, x.shape(), st, pad, dil, 1)
                           : conv2d_backward_weight(gy, x, w.shape(), st, pad, dil, 1);
    benchmark::DoNotOptimize(r.impl());
  }
  cd::set_layout(cd::Layout::Auto);
  state.counters["FLOPS"] = benchmark::Counter(s.flops(), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_ConvTerra)->DenseRange(0, kNumConv - 1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ConvPass)
    ->ArgsProduct({{0, 1}, benchmark::CreateDenseRange(0, kNumPass - 1, 1), {0, 1, 2}})
    ->UseRealTime()
    ->MinTime(0.2)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ConvDnnlPlain)->DenseRange(0, kNumConv - 1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ConvDnnlAny)->DenseRange(0, kNumConv - 1)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
