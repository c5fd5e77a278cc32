// DCGAN (Terra §5.1: DCGAN on MNIST): a ConvTranspose2d generator and a conv discriminator with
// two optimizers; each engine step runs a discriminator update and then a generator update.
// Generated "digits": strokes (bars, crosses, boxes) in [-1, 1]. The reported loss is the
// discriminator's, which falls as it learns to tell the strokes from early samples.
#include "common.h"

namespace terra::programs {
namespace {

using namespace terra::nn;
namespace F = terra::nn::functional;

constexpr int64_t kNoise = 16;

class Generator : public Module {
 public:
  // base: the first feature map's side (image side = 4 * base); ch: its channels.
  Generator(int64_t base, int64_t ch)
      : base(base), ch(ch), fc(kNoise, ch * base * base), bn0(ch), up1(ch, ch / 2, 4, 2, 1, 0, 1, false),
        bn1(ch / 2), up2(ch / 2, 1, 4, 2, 1) {
    register_module("fc", fc);
    register_module("bn0", bn0);
    register_module("up1", up1);
    register_module("bn1", bn1);
    register_module("up2", up2);
  }
  Tensor forward(const Tensor& z) override {
    Tensor h = F::relu(bn0(fc(z).reshape({z.size(0), ch, base, base})));
    h = F::relu(bn1(up1(h)));
    return F::tanh(up2(h));
  }
  int64_t base, ch;
  Linear fc;
  BatchNorm2d bn0;
  ConvTranspose2d up1;
  BatchNorm2d bn1;
  ConvTranspose2d up2;
};

class Discriminator : public Module {
 public:
  Discriminator(int64_t side, int64_t ch)
      : c1(1, ch / 2, 4, 2, 1), c2(ch / 2, ch, 4, 2, 1, 1, 1, false), bn2(ch), fc(ch * (side / 4) * (side / 4), 1) {
    register_module("c1", c1);
    register_module("c2", c2);
    register_module("bn2", bn2);
    register_module("fc", fc);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = leaky_relu(c1(x), 0.2);
    h = leaky_relu(bn2(c2(h)), 0.2);
    return fc(h.flatten(1));
  }
  Conv2d c1, c2;
  BatchNorm2d bn2;
  Linear fc;
};

std::vector<float> make_strokes(detail::HostRng& rng, int64_t n, int64_t s) {
  std::vector<float> x(size_t(n * s * s), -1.0f);
  for (int64_t i = 0; i < n; ++i) {
    float* img = x.data() + i * s * s;
    int64_t kind = rng.integer(0, 2), a = rng.integer(1, s - 2), b = rng.integer(1, s - 2);
    for (int64_t r = 0; r < s; ++r)
      for (int64_t c = 0; c < s; ++c) {
        bool on = false;
        if (kind == 0) on = r == a || r == a + 1;                  // bar
        if (kind == 1) on = r == a || c == b;                      // cross
        if (kind == 2) on = (r == 1 || r == s - 2 || c == 1 || c == s - 2) && r >= 1 && c >= 1 && r <= s - 2 && c <= s - 2;  // box
        if (on) img[r * s + c] = 1.0f;
      }
  }
  return x;
}

RunResult run(Engine& engine, const RunOptions& opts) {
  manual_seed(opts.seed);
  detail::HostRng rng(opts.seed);
  const int64_t n = 16, side = opts.quick ? 8 : 16, ch = opts.quick ? 32 : 64;
  std::vector<std::vector<float>> data;
  for (int i = 0; i < 8; ++i) data.push_back(make_strokes(rng, n, side));
  Generator gen(side / 4, ch);
  Discriminator disc(side, ch);
  optim::Adam opt_g(gen.parameters(), 2e-3, {0.5, 0.999});
  optim::Adam opt_d(disc.parameters(), 2e-3, {0.5, 0.999});
  detail::LossLog log(opts);
  for (int it = 0; it < opts.steps; ++it) {
    auto step = engine.step();
    Tensor real = tensor(data[size_t(it) % data.size()], {n, 1, side, side});
    Tensor fake = gen(randn({n, kNoise}));
    Tensor ones_t = ones({n, 1}), zeros_t = zeros({n, 1});
    // Discriminator: real -> 1, fake (detached from the generator) -> 0.
    Tensor d_loss = F::binary_cross_entropy_with_logits(disc(real), ones_t) +
                    F::binary_cross_entropy_with_logits(disc(fake.detach()), zeros_t);
    opt_d.zero_grad();
    d_loss.backward();
    opt_d.step();
    // Generator: make the (just updated) discriminator say 1.
    Tensor g_loss = F::binary_cross_entropy_with_logits(disc(fake), ones_t);
    opt_g.zero_grad();
    g_loss.backward();
    opt_g.step();
    log.record(it, d_loss);
  }
  return log.finish();
}

ProgramRegistrar reg({"dcgan", "GAN: ConvTranspose2d generator, two optimizers, D then G update in one step", run});

}  // namespace
}  // namespace terra::programs
