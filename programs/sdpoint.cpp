// SDPoint (Terra §5.1: stochastic downsampling on a ResNet): every step the host draws a random
// downsampling point (a block, or none) with std::mt19937 seeded from opts.seed and writes the
// downsampling ratio onto the block objects (SDResNet.stochastic_downsampling); the chosen block
// shrinks its input before running. Several paths through one network, chosen on the host.
#include "common.h"

namespace terra::programs {
namespace {

using namespace terra::nn;
namespace F = terra::nn::functional;

class ConvBlock : public Module {
 public:
  ConvBlock(int block_id, int64_t in, int64_t out, int64_t stride)
      : block_id(block_id), conv1(in, out, 3, stride, 1, 1, 1, false), bn1(out), conv2(out, out, 3, 1, 1, 1, 1, false),
        bn2(out) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    if (stride != 1 || in != out) {
      proj = register_module("proj", std::make_shared<Conv2d>(in, out, 1, stride, 0, 1, 1, false));
      proj_bn = register_module("proj_bn", std::make_shared<BatchNorm2d>(out));
    }
  }
  Tensor forward(const Tensor& input) override {
    Tensor x = input;
    if (downsampling_ratio < 1.0) {  // the stochastic downsampling point
      int64_t h = std::max<int64_t>(1, int64_t(double(x.size(2)) * downsampling_ratio));
      int64_t w = std::max<int64_t>(1, int64_t(double(x.size(3)) * downsampling_ratio));
      x = F::adaptive_avg_pool2d(x, h, w);
    }
    Tensor y = bn2(conv2(F::relu(bn1(conv1(x)))));
    return F::relu(y + (proj ? (*proj_bn)((*proj)(x)) : x));
  }
  int block_id;
  double downsampling_ratio = 1.0;
  Conv2d conv1;
  BatchNorm2d bn1;
  Conv2d conv2;
  BatchNorm2d bn2;
  std::shared_ptr<Conv2d> proj;
  std::shared_ptr<BatchNorm2d> proj_bn;
};

class SDResNet : public Module {
 public:
  SDResNet(int64_t width, int64_t classes) : stem(3, width, 3, 1, 1, 1, 1, false), bn(width), fc(2 * width, classes) {
    register_module("stem", stem);
    register_module("bn", bn);
    blocks.push_back(std::make_shared<ConvBlock>(0, width, width, 1));
    blocks.push_back(std::make_shared<ConvBlock>(1, width, 2 * width, 2));
    blocks.push_back(std::make_shared<ConvBlock>(2, 2 * width, 2 * width, 1));
    register_module("blocks", blocks);
    register_module("fc", fc);
  }
  // As the original: walk the layers and set each block's ratio (object mutation).
  void stochastic_downsampling(int block_id, double ratio) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      auto& b = blocks.at<ConvBlock>(i);
      b.downsampling_ratio = b.block_id == block_id ? ratio : 1.0;
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = F::relu(bn(stem(x)));
    for (auto& b : blocks) h = b->forward(h);
    return fc(F::adaptive_avg_pool2d(h, 1, 1).flatten(1));
  }
  Conv2d stem;
  BatchNorm2d bn;
  ModuleList blocks;
  Linear fc;
};

// Class k: diagonal or straight stripes of one of two frequencies.
void make_batch(detail::HostRng& rng, int64_t n, int64_t s, std::vector<float>& x, std::vector<int64_t>& y) {
  x.assign(size_t(n * 3 * s * s), 0.0f);
  y.assign(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = rng.integer(0, 3);
    y[size_t(i)] = k;
    double freq = k % 2 ? 1.6 : 0.7, phase = rng.uniform(0.0f, 6.28f);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t r = 0; r < s; ++r)
        for (int64_t q = 0; q < s; ++q) {
          double t = k / 2 ? double(r + q) : double(r);
          x[size_t(((i * 3 + c) * s + r) * s + q)] = float(std::sin(freq * t + phase)) + rng.normal(0.3f);
        }
  }
}

RunResult run(Engine& engine, const RunOptions& opts) {
  manual_seed(opts.seed);
  detail::HostRng rng(opts.seed);
  std::mt19937 choice(uint32_t(opts.seed));  // the per-step downsampling point
  const int64_t n = opts.quick ? 8 : 16, s = opts.quick ? 8 : 16, width = opts.quick ? 16 : 24, classes = 4;
  std::vector<std::vector<float>> xs(8);
  std::vector<std::vector<int64_t>> ys(8);
  for (size_t i = 0; i < xs.size(); ++i) make_batch(rng, n, s, xs[i], ys[i]);
  SDResNet model(width, classes);
  optim::SGD opt(model.parameters(), 0.05, 0.9);
  detail::LossLog log(opts);
  const int num_points = int(model.blocks.size()) + 1;  // one per block, and "no downsampling"
  for (int it = 0; it < opts.steps; ++it) {
    auto step = engine.step();
    int point = std::uniform_int_distribution<int>(0, num_points - 1)(choice);
    model.stochastic_downsampling(point, 0.5);
    size_t b = size_t(it) % xs.size();
    Tensor loss = F::cross_entropy(model(tensor(xs[b], {n, 3, s, s})), tensor(ys[b], {n}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    log.record(it, loss);
  }
  return log.finish();
}

ProgramRegistrar reg({"sdpoint", "per-step random downsampling point drawn on the host: several paths", run});

}  // namespace
}  // namespace terra::programs
