// YOLOv3 (Terra §5.1: YOLOv3 on VOC2012): a small darknet-style backbone, a coarse head, and a
// fine head fed by upsample_nearest2d of the coarse features concatenated with an earlier route;
// a detection loss (objectness BCE, box regression through `where`, class cross-entropy) per scale.
// Generated images hold coloured squares; their class is the colour.
#include "common.h"

namespace terra::programs {
namespace {

using namespace terra::nn;
namespace F = terra::nn::functional;

constexpr int64_t kClasses = 2, kOut = 5 + kClasses;  // objectness, 4 box values, class logits

// conv + BatchNorm + leaky relu (darknet's basic unit).
class ConvBN : public Module {
 public:
  ConvBN(int64_t in, int64_t out, int64_t k, int64_t stride)
      : conv(in, out, k, stride, k / 2, 1, 1, false), bn(out) {
    register_module("conv", conv);
    register_module("bn", bn);
  }
  Tensor forward(const Tensor& x) override { return leaky_relu(bn(conv(x)), 0.1); }
  Conv2d conv;
  BatchNorm2d bn;
};

class Yolo : public Module {
 public:
  Yolo()
      : c1(3, 16, 3, 1), c2(16, 32, 3, 2), c3(32, 32, 3, 2), c4(32, 64, 3, 2), head1(64, 64, 3, 1),
        out1(64, kOut, 1), lateral(64, 32, 1, 1), head2(64, 32, 3, 1), out2(32, kOut, 1) {
    for (auto [name, m] : std::vector<std::pair<const char*, Module*>>{{"c1", &c1},
                                                                      {"c2", &c2},
                                                                      {"c3", &c3},
                                                                      {"c4", &c4},
                                                                      {"head1", &head1},
                                                                      {"out1", &out1},
                                                                      {"lateral", &lateral},
                                                                      {"head2", &head2},
                                                                      {"out2", &out2}})
      register_module(name, *m);
  }
  // x [N, 3, S, S] -> {coarse [N, kOut, S/8, S/8], fine [N, kOut, S/4, S/4]}.
  std::vector<Tensor> detect(const Tensor& x) {
    Tensor route = c3(c2(c1(x)));
    Tensor deep = c4(route);
    Tensor coarse = out1(head1(deep));
    Tensor up = upsample_nearest2d(lateral(deep), 2.0);
    Tensor fine = out2(head2(cat({up, route}, 1)));
    return {coarse, fine};
  }
  ConvBN c1, c2, c3, c4, head1;
  Conv2d out1;
  ConvBN lateral, head2;
  Conv2d out2;
};

// Targets of one scale with a g x g grid.
struct ScaleTargets {
  std::vector<float> obj, box;  // [N, 1, g, g], [N, 4, g, g]
  std::vector<bool> mask;       // [N, 4, g, g]: true at cells responsible for an object
  std::vector<int64_t> cls;     // [N * g * g], -100 where no object
};
struct DetBatch {
  std::vector<float> images;
  std::vector<ScaleTargets> scales;
};

DetBatch make_batch(detail::HostRng& rng, int64_t n, int64_t s, const std::vector<int64_t>& grids) {
  DetBatch b;
  b.images.assign(size_t(n * 3 * s * s), 0.0f);
  for (float& v : b.images) v = rng.normal(0.1f);
  for (int64_t g : grids) {
    ScaleTargets t;
    t.obj.assign(size_t(n * g * g), 0.0f);
    t.box.assign(size_t(n * 4 * g * g), 0.0f);
    t.mask.assign(size_t(n * 4 * g * g), false);
    t.cls.assign(size_t(n * g * g), -100);
    b.scales.push_back(std::move(t));
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t objects = rng.integer(1, 2);
    for (int64_t o = 0; o < objects; ++o) {
      int64_t c = rng.integer(0, kClasses - 1);
      int64_t w = rng.integer(s / 8 + 1, s / 3), h = rng.integer(s / 8 + 1, s / 3);
      int64_t x0 = rng.integer(0, s - w), y0 = rng.integer(0, s - h);
      for (int64_t y = y0; y < y0 + h; ++y)
        for (int64_t x = x0; x < x0 + w; ++x) {
          b.images[size_t(((i * 3 + c) * s + y) * s + x)] += 1.0f;     // class colour
          b.images[size_t(((i * 3 + 2) * s + y) * s + x)] += 0.5f;     // shared brightness
        }
      double cx = (double(x0) + double(w) / 2) / double(s), cy = (double(y0) + double(h) / 2) / double(s);
      for (size_t k = 0; k < grids.size(); ++k) {
        int64_t g = grids[k];
        int64_t gx = std::min(g - 1, int64_t(cx * double(g))), gy = std::min(g - 1, int64_t(cy * double(g)));
        ScaleTargets& t = b.scales[k];
        int64_t cell = (i * g + gy) * g + gx;
        t.obj[size_t(cell)] = 1.0f;
        t.cls[size_t(cell)] = c;
        float vals[4] = {float(cx * double(g) - double(gx)), float(cy * double(g) - double(gy)),
                         float(double(w) / double(s)), float(double(h) / double(s))};
        for (int64_t j = 0; j < 4; ++j) {
          size_t at = size_t(((i * 4 + j) * g + gy) * g + gx);
          t.box[at] = vals[j];
          t.mask[at] = true;
        }
      }
    }
  }
  return b;
}

int64_t count_cells(const ScaleTargets& t) {
  int64_t c = 0;
  for (float v : t.obj) c += v > 0.5f;
  return c;
}

// pred [N, kOut, g, g] against one scale's targets.
Tensor scale_loss(const Tensor& pred, const ScaleTargets& t) {
  int64_t n = pred.size(0), g = pred.size(2);
  Tensor obj = pred.slice(1, 0, 1), box = pred.slice(1, 1, 5), cls = pred.slice(1, 5, kOut);
  Tensor obj_loss = F::binary_cross_entropy_with_logits(obj, tensor(t.obj, {n, 1, g, g}));
  Tensor diff = sigmoid(box) - tensor(t.box, {n, 4, g, g});
  Tensor mask = tensor_bool(t.mask, {n, 4, g, g});
  Tensor box_loss = where(mask, diff * diff, 0.0).sum() / double(std::max<int64_t>(1, count_cells(t)));
  Tensor cls_loss = F::cross_entropy(cls.permute({0, 2, 3, 1}).reshape({n * g * g, kClasses}), tensor(t.cls, {n * g * g}));
  return obj_loss * 4.0 + box_loss + cls_loss;
}

RunResult run(Engine& engine, const RunOptions& opts) {
  manual_seed(opts.seed);
  detail::HostRng rng(opts.seed);
  const int64_t n = opts.quick ? 8 : 16, s = opts.quick ? 16 : 32;
  std::vector<DetBatch> data;
  for (int i = 0; i < 8; ++i) data.push_back(make_batch(rng, n, s, {s / 8, s / 4}));
  Yolo model;
  optim::Adam opt(model.parameters(), 2e-3);
  detail::LossLog log(opts);
  for (int it = 0; it < opts.steps; ++it) {
    auto step = engine.step();
    const DetBatch& b = data[size_t(it) % data.size()];
    std::vector<Tensor> preds = model.detect(tensor(b.images, {n, 3, s, s}));
    Tensor loss = scale_loss(preds[0], b.scales[0]) + scale_loss(preds[1], b.scales[1]);
    opt.zero_grad();
    loss.backward();
    opt.step();
    log.record(it, loss);
  }
  return log.finish();
}

ProgramRegistrar reg({"yolov3", "multi-scale detector: upsample_nearest2d + cat route, where-masked box loss", run});

}  // namespace
}  // namespace terra::programs
