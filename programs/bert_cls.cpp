// BERT-CLS (Terra §5.1: BERT sentence classification): a tiny BERT encoder over padded sentences
// (key padding mask) with a classifier on the [CLS] token. Every few steps the host fetches the
// predictions (to_vector) and scores them with an F1 routine written in plain host code, standing in
// for sklearn.metrics.f1_score: a third-party call on fetched values that influences nothing in the
// graph. Generated task: a sentence's class is the keyword it contains.
#include "common.h"

namespace terra::programs {
namespace {

using namespace terra::nn;
namespace F = terra::nn::functional;

constexpr int64_t kPad = 0, kCls = 1, kKeyword0 = 2, kClasses = 3, kWord0 = 8, kVocab = 40;

// "Third-party" macro F1 (sklearn's f1_score(average="macro")): host vectors in, a double out.
double f1_score_macro(const std::vector<int64_t>& truth, const std::vector<int64_t>& pred, int64_t classes) {
  double total = 0;
  for (int64_t c = 0; c < classes; ++c) {
    double tp = 0, fp = 0, fn = 0;
    for (size_t i = 0; i < truth.size(); ++i) {
      tp += truth[i] == c && pred[i] == c;
      fp += truth[i] != c && pred[i] == c;
      fn += truth[i] == c && pred[i] != c;
    }
    total += tp == 0 ? 0.0 : 2 * tp / (2 * tp + fp + fn);
  }
  return total / double(classes);
}

class BertCls : public Module {
 public:
  BertCls(int64_t seq, int64_t d, int64_t heads, int64_t layers) : tok(kVocab, d), pos(seq, d), ln(d), cls(d, kClasses) {
    register_module("tok", tok);
    register_module("pos", pos);
    register_module("ln", ln);
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(std::make_shared<detail::TransformerBlock>(d, heads, 2 * d, /*pre_norm=*/false));
    register_module("blocks", blocks);
    register_module("cls", cls);
    NoGradGuard g;
    tok.weight.mul_(0.1);
    pos.weight.mul_(0.1);
  }
  // tokens [B, S], padding bool [B, S] (true = pad) -> logits [B, classes] from the [CLS] position.
  Tensor classify(const Tensor& tokens, const Tensor& padding) {
    Tensor h = ln(tok(tokens) + pos(arange(tokens.size(1))));
    for (size_t i = 0; i < blocks.size(); ++i) h = blocks.at<detail::TransformerBlock>(i).forward(h, Tensor(), padding);
    return cls(F::tanh(h.select(1, 0)));
  }
  Embedding tok, pos;
  LayerNorm ln;
  ModuleList blocks;
  Linear cls;
};

struct ClsBatch {
  std::vector<int64_t> tokens, labels;
  std::vector<bool> padding;
};

ClsBatch make_batch(detail::HostRng& rng, int64_t n, int64_t seq) {
  ClsBatch b;
  for (int64_t i = 0; i < n; ++i) {
    int64_t label = rng.integer(0, kClasses - 1), len = rng.integer(seq / 2, seq);
    int64_t at = rng.integer(1, len - 1);
    b.labels.push_back(label);
    for (int64_t p = 0; p < seq; ++p) {
      int64_t t = p == 0 ? kCls : p >= len ? kPad : p == at ? kKeyword0 + label : rng.integer(kWord0, kVocab - 1);
      b.tokens.push_back(t);
      b.padding.push_back(p >= len);
    }
  }
  return b;
}

RunResult run(Engine& engine, const RunOptions& opts) {
  manual_seed(opts.seed);
  detail::HostRng rng(opts.seed);
  const int64_t n = 16, seq = opts.quick ? 12 : 32, d = opts.quick ? 32 : 64, heads = 2, layers = opts.quick ? 1 : 2;
  const int eval_every = 3;
  std::vector<ClsBatch> data;
  for (int i = 0; i < 16; ++i) data.push_back(make_batch(rng, n, seq));
  BertCls model(seq, d, heads, layers);
  optim::AdamW opt(model.parameters(), 3e-3);
  detail::LossLog log(opts);
  std::vector<double> f1_history;  // host-side metric: read by nobody in the graph
  for (int it = 0; it < opts.steps; ++it) {
    auto step = engine.step();
    const ClsBatch& b = data[size_t(it) % data.size()];
    Tensor logits = model.classify(tensor(b.tokens, {n, seq}), tensor_bool(b.padding, {n, seq}));
    Tensor loss = F::cross_entropy(logits, tensor(b.labels, {n}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (it % eval_every == eval_every - 1) {
      std::vector<int64_t> pred = argmax(logits, -1).to_vector<int64_t>();
      f1_history.push_back(f1_score_macro(b.labels, pred, kClasses));
    }
    log.record(it, loss);
  }
  return log.finish();
}

ProgramRegistrar reg({"bert_cls", "host fetches predictions every few steps for a third-party F1 metric", run});

}  // namespace
}  // namespace terra::programs
