// GPT-2 (Terra §5.1: GPT-2 on OpenWebText): a causal-attention language model (pre-norm blocks with
// nn::MultiheadAttention and a causal mask) trained with next-token cross-entropy. Generated text:
// arithmetic sequences with per-sequence steps, so the next token is predictable from the context.
#include "common.h"

namespace terra::programs {
namespace {

using namespace terra::nn;
namespace F = terra::nn::functional;

constexpr int64_t kVocab = 32;

class GPT : public Module {
 public:
  GPT(int64_t seq, int64_t d, int64_t heads, int64_t layers) : tok(kVocab, d), pos(seq, d), ln_f(d), head(d, kVocab) {
    register_module("tok", tok);
    register_module("pos", pos);
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(std::make_shared<detail::TransformerBlock>(d, heads, 4 * d, /*pre_norm=*/true));
    register_module("blocks", blocks);
    register_module("ln_f", ln_f);
    register_module("head", head);
    NoGradGuard g;
    tok.weight.mul_(0.05);
    pos.weight.mul_(0.05);
  }
  // tokens [B, S] -> logits [B, S, V]; position i attends to positions <= i.
  Tensor forward(const Tensor& tokens) override {
    int64_t s = tokens.size(1);
    Tensor mask = MultiheadAttention::causal_mask(s);
    Tensor h = tok(tokens) + pos(arange(s));
    for (size_t i = 0; i < blocks.size(); ++i) h = blocks.at<detail::TransformerBlock>(i).forward(h, mask);
    return head(ln_f(h));
  }
  Embedding tok, pos;
  ModuleList blocks;
  LayerNorm ln_f;
  Linear head;
};

// Sequences of length seq + 1 that climb by two alternating per-sequence steps (mod the vocabulary):
// the last token narrows the next one down, the context pins it.
std::vector<int64_t> make_text(detail::HostRng& rng, int64_t n, int64_t seq) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < n; ++i) {
    int64_t a = rng.integer(1, 3), b = rng.integer(1, 3), x = rng.integer(0, kVocab - 1);
    for (int64_t p = 0; p <= seq; ++p) {
      t.push_back(x);
      x = (x + (p % 2 ? b : a)) % kVocab;
    }
  }
  return t;
}

RunResult run(Engine& engine, const RunOptions& opts) {
  manual_seed(opts.seed);
  detail::HostRng rng(opts.seed);
  const int64_t n = 8, seq = opts.quick ? 16 : 64, d = opts.quick ? 32 : 64, heads = 4, layers = opts.quick ? 1 : 2;
  std::vector<std::vector<int64_t>> data;
  for (int i = 0; i < 16; ++i) data.push_back(make_text(rng, n, seq));
  GPT model(seq, d, heads, layers);
  optim::AdamW opt(model.parameters(), 3e-3);
  detail::LossLog log(opts);
  for (int it = 0; it < opts.steps; ++it) {
    auto step = engine.step();
    Tensor text = tensor(data[size_t(it) % data.size()], {n, seq + 1});
    Tensor inputs = text.slice(1, 0, seq), targets = text.slice(1, 1, seq + 1);
    Tensor logits = model(inputs);
    Tensor loss = F::cross_entropy(logits.reshape({n * seq, kVocab}), targets.reshape({n * seq}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    log.record(it, loss);
  }
  return log.finish();
}

ProgramRegistrar reg({"gpt2", "causal-attention LM: MultiheadAttention with a causal mask, next-token loss", run});

}  // namespace
}  // namespace terra::programs
