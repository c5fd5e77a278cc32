// BERT-Q&A (Terra §5.1: BERT on SQuAD 1.1): a tiny BERT encoder with span start/end heads and a
// cross-entropy on each. Generated task: the question names one of several entity markers in the
// context; the answer is the span from that marker to the word before its END token.
#include <algorithm>

#include "common.h"

namespace terra::programs {
namespace {

using namespace terra::nn;
namespace F = terra::nn::functional;

constexpr int64_t kCls = 1, kSep = 2, kEnd = 3, kEntity0 = 4, kWord0 = 12, kVocab = 48;

class BertQA : public Module {
 public:
  BertQA(int64_t seq, int64_t d, int64_t heads, int64_t layers)
      : tok(kVocab, d), pos(seq, d), ln(d), qa(d, 2) {
    register_module("tok", tok);
    register_module("pos", pos);
    register_module("ln", ln);
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(std::make_shared<detail::TransformerBlock>(d, heads, 2 * d, /*pre_norm=*/false));
    register_module("blocks", blocks);
    register_module("qa", qa);
    NoGradGuard g;
    tok.weight.mul_(0.1);
    pos.weight.mul_(0.1);
  }
  // tokens [B, S] -> start and end logits, each [B, S].
  std::pair<Tensor, Tensor> forward_qa(const Tensor& tokens) {
    Tensor h = ln(tok(tokens) + pos(arange(tokens.size(1))));
    for (size_t i = 0; i < blocks.size(); ++i) h = blocks.at<detail::TransformerBlock>(i).forward(h, Tensor());
    Tensor logits = qa(h);  // [B, S, 2]
    return {logits.select(2, 0), logits.select(2, 1)};
  }
  Embedding tok, pos;
  LayerNorm ln;
  ModuleList blocks;
  Linear qa;
};

struct QABatch {
  std::vector<int64_t> tokens, start, end;
};

// [CLS] q [SEP] context: the context holds one segment [E_k, word.., END] per entity k at random
// places between filler words; the answer to question q is the span E_q .. last word of segment q.
QABatch make_batch(detail::HostRng& rng, int64_t n, int64_t seq, int64_t entities, int64_t max_words) {
  QABatch b;
  for (int64_t i = 0; i < n; ++i) {
    int64_t q = rng.integer(0, entities - 1);
    std::vector<std::vector<int64_t>> segs(static_cast<size_t>(entities));
    int64_t used = 0;
    for (int64_t k = 0; k < entities; ++k) {
      auto& s = segs[size_t(k)];
      s.push_back(kEntity0 + k);
      int64_t words = rng.integer(1, max_words);
      for (int64_t w = 0; w < words; ++w) s.push_back(rng.integer(kWord0, kVocab - 1));
      s.push_back(kEnd);
      used += int64_t(s.size());
    }
    std::shuffle(segs.begin(), segs.end(), rng.engine());
    int64_t ctx = seq - 3, filler = ctx - used;
    // Split the filler words into entities + 1 gaps.
    std::vector<int64_t> gaps(size_t(entities + 1), 0);
    for (int64_t f = 0; f < filler; ++f) gaps[size_t(rng.integer(0, entities))]++;
    std::vector<int64_t> t = {kCls, kEntity0 + q, kSep};
    int64_t st = 0, en = 0;
    for (int64_t k = 0; k <= entities; ++k) {
      for (int64_t f = 0; f < gaps[size_t(k)]; ++f) t.push_back(rng.integer(kWord0, kVocab - 1));
      if (k == entities) break;
      const auto& s = segs[size_t(k)];
      if (s[0] == kEntity0 + q) {
        st = int64_t(t.size());
        en = st + int64_t(s.size()) - 2;
      }
      t.insert(t.end(), s.begin(), s.end());
    }
    b.tokens.insert(b.tokens.end(), t.begin(), t.end());
    b.start.push_back(st);
    b.end.push_back(en);
  }
  return b;
}

RunResult run(Engine& engine, const RunOptions& opts) {
  manual_seed(opts.seed);
  detail::HostRng rng(opts.seed);
  const int64_t n = 8, seq = opts.quick ? 16 : 48, d = opts.quick ? 32 : 64, heads = 2, layers = opts.quick ? 1 : 2;
  const int64_t entities = opts.quick ? 2 : 4, max_words = opts.quick ? 2 : 3;
  std::vector<QABatch> data;
  for (int i = 0; i < 16; ++i) data.push_back(make_batch(rng, n, seq, entities, max_words));
  BertQA model(seq, d, heads, layers);
  optim::AdamW opt(model.parameters(), 3e-3);
  detail::LossLog log(opts);
  for (int it = 0; it < opts.steps; ++it) {
    auto step = engine.step();
    const QABatch& b = data[size_t(it) % data.size()];
    Tensor tokens = tensor(b.tokens, {n, seq});
    auto [start_logits, end_logits] = model.forward_qa(tokens);
    Tensor loss = (F::cross_entropy(start_logits, tensor(b.start, {n})) +
                   F::cross_entropy(end_logits, tensor(b.end, {n}))) * 0.5;
    opt.zero_grad();
    loss.backward();
    opt.step();
    log.record(it, loss);
  }
  return log.finish();
}

ProgramRegistrar reg({"bert_qa", "transformer encoder with two span heads (start/end cross-entropy)", run});

}  // namespace
}  // namespace terra::programs
