// MusicTransformer (Terra §5.1: Music Transformer on e-Piano MIDI): a decoder-only transformer over
// note events, written in the trainer-object style of the original. train_step stores the per-token
// loss on the object (self.loss_value = ...) inside the step; train_on_batch reads it after the step
// has ended and reduces it there, outside any step (tf.reduce_mean(self.loss_value)).
#include "common.h"

namespace terra::programs {
namespace {

using namespace terra::nn;
namespace F = terra::nn::functional;

constexpr int64_t kPitches = 48;

class MusicTransformerDecoder : public Module {
 public:
  MusicTransformerDecoder(int64_t seq, int64_t d, int64_t heads, int64_t layers)
      : emb(kPitches, d), pos(seq, d), ln_f(d), head(d, kPitches) {
    register_module("emb", emb);
    register_module("pos", pos);
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(std::make_shared<detail::TransformerBlock>(d, heads, 2 * d, /*pre_norm=*/true));
    register_module("blocks", blocks);
    register_module("ln_f", ln_f);
    register_module("head", head);
    NoGradGuard g;
    emb.weight.mul_(0.05);
    pos.weight.mul_(0.05);
    opt = std::make_unique<optim::Adam>(parameters(), 3e-3);
  }

  Tensor call(const Tensor& inp, const Tensor& lookup_mask) {
    Tensor h = emb(inp) + pos(arange(inp.size(1)));
    for (size_t i = 0; i < blocks.size(); ++i) h = blocks.at<detail::TransformerBlock>(i).forward(h, lookup_mask);
    return head(ln_f(h));
  }

  // One training step; the per-token loss stays on the object.
  void train_step(const Tensor& inp_tar, const Tensor& out_tar, const Tensor& lookup_mask) {
    Tensor predictions = call(inp_tar, lookup_mask);
    int64_t tokens = inp_tar.numel();
    loss_value = F::cross_entropy(predictions.reshape({tokens, kPitches}), out_tar.reshape({tokens}), -100, "none");
    opt->zero_grad();
    loss_value.mean().backward();
    opt->step();
  }

  // Not a conversion scope: the step ends, then the host reduces and reads self.loss_value.
  double train_on_batch(Engine& engine, const std::vector<int64_t>& events, int64_t n, int64_t seq) {
    {
      auto step = engine.step();
      Tensor x = tensor(events, {n, seq + 1});
      train_step(x.slice(1, 0, seq), x.slice(1, 1, seq + 1), lookup_mask(seq));
    }
    return loss_value.mean().item<double>();
  }

  // The look-ahead mask, built on the host as the original does (true = may not attend).
  static Tensor lookup_mask(int64_t seq) {
    std::vector<bool> m(size_t(seq * seq));
    for (int64_t i = 0; i < seq; ++i)
      for (int64_t j = 0; j < seq; ++j) m[size_t(i * seq + j)] = j > i;
    return tensor_bool(m, {seq, seq});
  }

  Embedding emb, pos;
  ModuleList blocks;
  LayerNorm ln_f;
  Linear head;
  std::unique_ptr<optim::Adam> opt;
  Tensor loss_value;
};

// Arpeggios and scales: a start pitch and an interval pattern, cycled and wrapped into range.
std::vector<int64_t> make_events(detail::HostRng& rng, int64_t n, int64_t seq) {
  static const std::vector<std::vector<int64_t>> patterns = {{4, 3, 5}, {3, 4, 5}, {2, 2, 1, 2, 2, 2, 1}, {7, -5}};
  std::vector<int64_t> t;
  for (int64_t i = 0; i < n; ++i) {
    const auto& pat = patterns[size_t(rng.integer(0, int64_t(patterns.size()) - 1))];
    int64_t p = rng.integer(0, kPitches - 1);
    for (int64_t k = 0; k <= seq; ++k) {
      t.push_back(p);
      p = ((p + pat[size_t(k) % pat.size()]) % kPitches + kPitches) % kPitches;
    }
  }
  return t;
}

RunResult run(Engine& engine, const RunOptions& opts) {
  manual_seed(opts.seed);
  detail::HostRng rng(opts.seed);
  const int64_t n = opts.quick ? 4 : 8, seq = opts.quick ? 16 : 64, d = opts.quick ? 32 : 64, heads = 4, layers = opts.quick ? 1 : 2;
  std::vector<std::vector<int64_t>> data;
  for (int i = 0; i < 16; ++i) data.push_back(make_events(rng, n, seq));
  MusicTransformerDecoder trainer(seq, d, heads, layers);
  detail::LossLog log(opts);
  for (int it = 0; it < opts.steps; ++it)
    log.record_value(it, trainer.train_on_batch(engine, data[size_t(it) % data.size()], n, seq));
  return log.finish();
}

ProgramRegistrar reg({"music_transformer", "trainer object stores the loss inside the step; it is reduced and read after the step", run});

}  // namespace
}  // namespace terra::programs
