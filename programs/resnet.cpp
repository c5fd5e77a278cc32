// ResNet (Terra §5.1: ResNet50 on ImageNet): a small residual CNN with BatchNorm2d classifying
// generated images. The plain CNN case: one path, every op in the graph.
#include "common.h"

namespace terra::programs {
namespace {

using namespace terra::nn;
namespace F = terra::nn::functional;

// conv-bn-relu-conv-bn plus the shortcut (a 1x1 projection when the shape changes), then relu.
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride)
      : conv1(in, out, 3, stride, 1, 1, 1, false), bn1(out), conv2(out, out, 3, 1, 1, 1, 1, false), bn2(out) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    if (stride != 1 || in != out) {
      proj = register_module("proj", std::make_shared<Conv2d>(in, out, 1, stride, 0, 1, 1, false));
      proj_bn = register_module("proj_bn", std::make_shared<BatchNorm2d>(out));
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = F::relu(bn1(conv1(x)));
    h = bn2(conv2(h));
    Tensor s = proj ? (*proj_bn)((*proj)(x)) : x;
    return F::relu(h + s);
  }
  Conv2d conv1;
  BatchNorm2d bn1;
  Conv2d conv2;
  BatchNorm2d bn2;
  std::shared_ptr<Conv2d> proj;
  std::shared_ptr<BatchNorm2d> proj_bn;
};

class ResNet : public Module {
 public:
  ResNet(int64_t width, int64_t classes)
      : stem(3, width, 3, 1, 1, 1, 1, false), stem_bn(width), fc(2 * width, classes) {
    register_module("stem", stem);
    register_module("stem_bn", stem_bn);
    blocks.push_back(std::make_shared<BasicBlock>(width, width, 1));
    blocks.push_back(std::make_shared<BasicBlock>(width, 2 * width, 2));
    blocks.push_back(std::make_shared<BasicBlock>(2 * width, 2 * width, 1));
    register_module("blocks", blocks);
    register_module("fc", fc);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = F::relu(stem_bn(stem(x)));
    for (auto& b : blocks) h = b->forward(h);
    h = F::adaptive_avg_pool2d(h, 1, 1).flatten(1);
    return fc(h);
  }
  Conv2d stem;
  BatchNorm2d stem_bn;
  ModuleList blocks;
  Linear fc;
};

// Class k: a class-specific oriented stripe pattern plus noise and a random brightness offset.
struct ImageData {
  std::vector<std::vector<float>> images;
  std::vector<std::vector<int64_t>> labels;
};
ImageData make_images(detail::HostRng& rng, int batches, int64_t n, int64_t hw, int64_t classes) {
  ImageData d;
  for (int b = 0; b < batches; ++b) {
    std::vector<float> x(size_t(n * 3 * hw * hw));
    std::vector<int64_t> y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int64_t k = rng.integer(0, classes - 1);
      y[size_t(i)] = k;
      float shift = rng.uniform(-0.5f, 0.5f);
      double angle = 3.14159265 * double(k) / double(classes);
      double fx = std::cos(angle), fy = std::sin(angle);
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t r = 0; r < hw; ++r)
          for (int64_t q = 0; q < hw; ++q) {
            double v = std::sin(1.3 * (fx * double(q) + fy * double(r)) + double(c));
            x[size_t(((i * 3 + c) * hw + r) * hw + q)] = float(v) + shift + rng.normal(0.3f);
          }
    }
    d.images.push_back(std::move(x));
    d.labels.push_back(std::move(y));
  }
  return d;
}

RunResult run(Engine& engine, const RunOptions& opts) {
  manual_seed(opts.seed);
  detail::HostRng rng(opts.seed);
  const int64_t n = opts.quick ? 8 : 16, hw = opts.quick ? 8 : 16, width = opts.quick ? 16 : 24, classes = 4;
  ImageData data = make_images(rng, 8, n, hw, classes);
  ResNet model(width, classes);
  optim::SGD opt(model.parameters(), 0.05, 0.9);
  detail::LossLog log(opts);
  for (int it = 0; it < opts.steps; ++it) {
    auto step = engine.step();
    size_t b = size_t(it) % data.images.size();
    Tensor x = tensor(data.images[b], {n, 3, hw, hw});
    Tensor y = tensor(data.labels[b], {n});
    Tensor loss = F::cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    log.record(it, loss);
  }
  return log.finish();
}

ProgramRegistrar reg({"resnet", "plain residual CNN with BatchNorm2d (running stats updated in place)", run});

}  // namespace
}  // namespace terra::programs
