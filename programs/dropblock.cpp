// DropBlock (Terra §5.1: tf-dropblock on a ResNet): a DropBlock2D layer whose keep probability is
// mutated on the layer object mid-training by a linear schedule (set_keep_prob every few steps, as
// the original). The keep probability becomes the Bernoulli op's attribute, so each schedule value
// is a different op, and keep_prob == 1 skips the layer: several traces from one object mutation.
#include <optional>

#include "common.h"

namespace terra::programs {
namespace {

using namespace terra::nn;
namespace F = terra::nn::functional;

class DropBlock2D : public Module {
 public:
  DropBlock2D(int64_t block_size, double keep_prob) : block_size(block_size), keep_prob(keep_prob) { set_keep_prob(); }
  // As the original: the schedule writes the new value onto the layer object.
  void set_keep_prob(std::optional<double> kp = std::nullopt) {
    if (kp) keep_prob = *kp;
  }
  Tensor forward(const Tensor& x) override {
    if (!is_training() || keep_prob >= 1.0) return x;
    int64_t h = x.size(2), w = x.size(3), bs = block_size;
    // Seed rate so that about (1 - keep_prob) of the units end up dropped.
    double gamma = (1.0 - keep_prob) / double(bs * bs) * double(h * w) / double((h - bs + 1) * (w - bs + 1));
    Tensor seeds = bernoulli(x.shape(), gamma);
    Tensor block = F::max_pool2d(seeds, bs, 1, bs / 2);  // grows each seed into a bs x bs block
    Tensor keep = 1.0 - block;
    return x * keep * (double(keep.numel()) / (keep.sum() + 1e-6));
  }
  std::string name() const override { return "DropBlock2D"; }
  int64_t block_size;
  double keep_prob;
};

class Net : public Module {
 public:
  Net(int64_t width, int64_t classes)
      : stem(3, width, 3, 1, 1, 1, 1, false), bn0(width), c1(width, 2 * width, 3, 2, 1, 1, 1, false), bn1(2 * width),
        c2(2 * width, 2 * width, 3, 1, 1, 1, 1, false), bn2(2 * width), drop1(3, 1.0), drop2(3, 1.0),
        fc(2 * width, classes) {
    for (auto [name, m] : std::vector<std::pair<const char*, Module*>>{{"stem", &stem}, {"bn0", &bn0}, {"c1", &c1},
                                                                      {"bn1", &bn1}, {"c2", &c2}, {"bn2", &bn2},
                                                                      {"drop1", &drop1}, {"drop2", &drop2}, {"fc", &fc}})
      register_module(name, *m);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = F::relu(bn0(stem(x)));
    h = drop1(F::relu(bn1(c1(h))));
    h = drop2(F::relu(bn2(c2(h)) + h));
    return fc(F::adaptive_avg_pool2d(h, 1, 1).flatten(1));
  }
  Conv2d stem;
  BatchNorm2d bn0;
  Conv2d c1;
  BatchNorm2d bn1;
  Conv2d c2;
  BatchNorm2d bn2;
  DropBlock2D drop1, drop2;
  Linear fc;
};

// Class k: a bright blob in quadrant k on a noisy background.
void make_batch(detail::HostRng& rng, int64_t n, int64_t s, std::vector<float>& x, std::vector<int64_t>& y) {
  x.assign(size_t(n * 3 * s * s), 0.0f);
  y.assign(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = rng.integer(0, 3);
    y[size_t(i)] = k;
    int64_t r0 = (k / 2) * s / 2 + rng.integer(0, s / 8), c0 = (k % 2) * s / 2 + rng.integer(0, s / 8);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t r = 0; r < s; ++r)
        for (int64_t q = 0; q < s; ++q) {
          bool on = r >= r0 && r < r0 + 3 * s / 8 && q >= c0 && q < c0 + 3 * s / 8;
          x[size_t(((i * 3 + c) * s + r) * s + q)] = (on ? 1.5f : 0.0f) + rng.normal(0.3f);
        }
  }
}

RunResult run(Engine& engine, const RunOptions& opts) {
  manual_seed(opts.seed);
  detail::HostRng rng(opts.seed);
  const int64_t n = opts.quick ? 8 : 16, s = opts.quick ? 8 : 16, width = opts.quick ? 16 : 32, classes = 4;
  std::vector<std::vector<float>> xs(8);
  std::vector<std::vector<int64_t>> ys(8);
  for (size_t i = 0; i < xs.size(); ++i) make_batch(rng, n, s, xs[i], ys[i]);
  Net model(width, classes);
  optim::SGD opt(model.parameters(), 0.05, 0.9);
  detail::LossLog log(opts);
  const int update_every = 3;
  for (int it = 0; it < opts.steps; ++it) {
    auto step = engine.step();
    // Linear keep-probability schedule 1.0 -> 0.85, written onto the layer objects mid-step.
    if (it % update_every == 0) {
      double kp = std::max(0.85, 1.0 - 0.05 * double(it / update_every));
      model.drop1.set_keep_prob(kp);
      model.drop2.set_keep_prob(kp);
    }
    size_t b = size_t(it) % xs.size();
    Tensor loss = F::cross_entropy(model(tensor(xs[b], {n, 3, s, s})), tensor(ys[b], {n}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    log.record(it, loss);
  }
  return log.finish();
}

ProgramRegistrar reg({"dropblock", "layer object's keep_prob mutated by a schedule: changes the bernoulli op's attribute", run});

}  // namespace
}  // namespace terra::programs
