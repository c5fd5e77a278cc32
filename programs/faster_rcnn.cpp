// FasterRCNN (Terra §5.1: Faster R-CNN on COCO): a backbone, a region proposal head scoring every
// feature cell, and a region head classifying the proposals. A fetched tensor value decides a shape
// used later in the same step: the number of proposals is clamp(int(sigmoid(scores).sum().item())),
// the host ranks the fetched scores to pick that many cells, and index_select gathers them.
#include <algorithm>
#include <numeric>

#include "common.h"

namespace terra::programs {
namespace {

using namespace terra::nn;
namespace F = terra::nn::functional;

constexpr int64_t kClasses = 3;  // background + 2 object classes

class FasterRCNN : public Module {
 public:
  explicit FasterRCNN(int64_t width)
      : c1(3, width, 3, 1, 1), c2(width, 2 * width, 3, 2, 1), c3(2 * width, 2 * width, 3, 2, 1),
        rpn_conv(2 * width, 2 * width, 3, 1, 1), rpn_obj(2 * width, 1, 1), roi_fc(2 * width, 32),
        roi_cls(32, kClasses) {
    for (auto [name, m] : std::vector<std::pair<const char*, Module*>>{{"c1", &c1},
                                                                      {"c2", &c2},
                                                                      {"c3", &c3},
                                                                      {"rpn_conv", &rpn_conv},
                                                                      {"rpn_obj", &rpn_obj},
                                                                      {"roi_fc", &roi_fc},
                                                                      {"roi_cls", &roi_cls}})
      register_module(name, *m);
  }
  Tensor backbone(const Tensor& x) { return F::relu(c3(F::relu(c2(F::relu(c1(x)))))); }
  Conv2d c1, c2, c3, rpn_conv, rpn_obj;
  Linear roi_fc, roi_cls;
};

struct DetBatch {
  std::vector<float> images;
  std::vector<float> objectness;  // [N, 1, g, g]: 1 where a cell overlaps an object
  std::vector<int64_t> cell_class;  // [N * g * g]: 0 background, 1 + class otherwise
};

DetBatch make_batch(detail::HostRng& rng, int64_t n, int64_t s, int64_t g) {
  DetBatch b;
  b.images.resize(size_t(n * 3 * s * s));
  for (float& v : b.images) v = rng.normal(0.2f);
  b.objectness.assign(size_t(n * g * g), 0.0f);
  b.cell_class.assign(size_t(n * g * g), 0);
  const int64_t cell = s / g;
  for (int64_t i = 0; i < n; ++i) {
    int64_t objects = rng.integer(1, 3);
    for (int64_t o = 0; o < objects; ++o) {
      int64_t c = rng.integer(0, kClasses - 2);
      int64_t w = rng.integer(cell, 2 * cell), x0 = rng.integer(0, s - w), y0 = rng.integer(0, s - w);
      for (int64_t y = y0; y < y0 + w; ++y)
        for (int64_t x = x0; x < x0 + w; ++x) {
          b.images[size_t(((i * 3 + c) * s + y) * s + x)] += 1.0f;
          // A cell is labelled with the object covering its centre.
          if (y % cell == cell / 2 && x % cell == cell / 2) {
            size_t at = size_t((i * g + y / cell) * g + x / cell);
            b.objectness[at] = 1.0f;
            b.cell_class[at] = 1 + c;
          }
        }
    }
  }
  return b;
}

RunResult run(Engine& engine, const RunOptions& opts) {
  manual_seed(opts.seed);
  detail::HostRng rng(opts.seed);
  const int64_t n = opts.quick ? 2 : 4, s = opts.quick ? 16 : 32, g = s / 4, width = opts.quick ? 16 : 32;
  const int64_t min_props = 4, max_props = opts.quick ? 16 : 48;
  std::vector<DetBatch> data;
  for (int i = 0; i < 8; ++i) data.push_back(make_batch(rng, n, s, g));
  FasterRCNN model(width);
  optim::SGD opt(model.parameters(), 0.02, 0.9);
  detail::LossLog log(opts);
  for (int it = 0; it < opts.steps; ++it) {
    auto step = engine.step();
    const DetBatch& b = data[size_t(it) % data.size()];
    Tensor feat = model.backbone(tensor(b.images, {n, 3, s, s}));           // [N, C, g, g]
    Tensor scores = model.rpn_obj(F::relu(model.rpn_conv(feat)));           // [N, 1, g, g]
    Tensor rpn_loss = F::binary_cross_entropy_with_logits(scores, tensor(b.objectness, {n, 1, g, g}));
    // The fetched value decides how many proposals the region head sees this step.
    Tensor probs = sigmoid(scores).flatten();
    int64_t k = std::clamp<int64_t>(int64_t(probs.sum().item<float>()), min_props, max_props);
    std::vector<float> p = probs.to_vector<float>();
    std::vector<int64_t> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return p[size_t(a)] > p[size_t(c)]; });
    order.resize(size_t(k));
    std::vector<int64_t> labels;
    for (int64_t cell : order) labels.push_back(b.cell_class[size_t(cell)]);
    Tensor cells = feat.permute({0, 2, 3, 1}).reshape({n * g * g, feat.size(1)});
    Tensor rois = index_select(cells, 0, tensor(order, {k}));               // [k, C]
    Tensor roi_logits = model.roi_cls(F::relu(model.roi_fc(rois)));
    Tensor loss = rpn_loss + F::cross_entropy(roi_logits, tensor(labels, {k}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    log.record(it, loss);
  }
  return log.finish();
}

ProgramRegistrar reg({"faster_rcnn", "a fetched score sum decides the proposal count (a shape) used later in the step", run});

}  // namespace
}  // namespace terra::programs
