// Two shape-varying training loops (issue #11's measure of symbolic dimensions), shared by
// tests/runtime/dynamic_shapes_test.cpp and bench/dynamic_shapes.cpp:
// - a token model fed a random batch (4..16) and sequence length (16..96) every step, with a fetched
//   count that decides how many positions an auxiliary loss reads (a slice bound);
// - a CNN over an epoch of full batches and one smaller last batch, epoch after epoch.
// Each returns every step's loss (fetched after the run), so modes compare value for value.
#pragma once
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <terra/terra.h>

namespace terra::workloads {

// Each step's loss, fetched once the run is over (a fetch per step would change what is measured).
inline std::vector<double> values_of(const std::vector<Tensor>& losses) {
  std::vector<double> v;
  for (const Tensor& t : losses) v.push_back(t.item<double>());
  return v;
}

struct TokenModel : nn::Module {
  TokenModel(int64_t vocab, int64_t d, int64_t heads, int64_t classes)
      : emb(vocab, d), attn(d, heads), ln1(d), ln2(d), fc1(d, 2 * d), fc2(2 * d, d), head(d, classes), aux(d, vocab) {
    for (auto [name, m] : std::vector<std::pair<const char*, nn::Module*>>{
             {"emb", &emb}, {"attn", &attn}, {"ln1", &ln1}, {"ln2", &ln2}, {"fc1", &fc1}, {"fc2", &fc2}, {"head", &head},
             {"aux", &aux}})
      register_module(name, *m);
  }
  // tokens [B, T] -> hidden [B, T, d]
  Tensor encode(const Tensor& tokens) {
    Tensor x = emb(tokens);
    Tensor h = ln1(x);
    Tensor y = x + attn(h, h, h);
    return y + fc2(nn::functional::gelu(fc1(ln2(y))));
  }
  nn::Embedding emb;
  nn::MultiheadAttention attn;
  nn::LayerNorm ln1, ln2;
  nn::Linear fc1, fc2, head, aux;
};

struct TokenConfig {
  int64_t vocab = 64, d = 32, heads = 4, classes = 4;
  int64_t min_batch = 4, max_batch = 16, min_len = 16, max_len = 96;
};

// The label of a sequence is its first token mod `classes`; the auxiliary loss predicts each of the
// first k tokens from its own position (k decided on the host from the fetched main loss).
inline std::vector<double> train_token_model(Engine& engine, int steps, uint32_t seed = 1, TokenConfig c = {}) {
  manual_seed(seed);
  std::mt19937 rng(seed);
  TokenModel model(c.vocab, c.d, c.heads, c.classes);
  optim::Adam opt(model.parameters(), 1e-3);
  std::vector<Tensor> losses;
  for (int s = 0; s < steps; ++s) {
    auto step = engine.step();
    int64_t b = std::uniform_int_distribution<int64_t>(c.min_batch, c.max_batch)(rng);
    int64_t t = std::uniform_int_distribution<int64_t>(c.min_len, c.max_len)(rng);
    std::vector<int64_t> tok(static_cast<size_t>(b * t)), lab(static_cast<size_t>(b));
    for (auto& v : tok) v = std::uniform_int_distribution<int64_t>(0, c.vocab - 1)(rng);
    for (int64_t i = 0; i < b; ++i) lab[size_t(i)] = tok[size_t(i * t)] % c.classes;
    Tensor tokens = tensor(tok, {b, t});
    Tensor h = model.encode(tokens);
    Tensor main = nn::functional::cross_entropy(model.head(h.mean({1})), tensor(lab, {b}));
    // The fetched loss decides how many positions the auxiliary head reads: a data-dependent shape.
    int64_t k = std::clamp<int64_t>(int64_t(main.item<float>() * 8.0f), 1, t);
    Tensor first_k = h.slice(1, 0, k);                                        // [b, k, d]
    Tensor aux_logits = model.aux(first_k).reshape({b * k, c.vocab});         // the reshape carries b*k
    Tensor aux_target = tokens.slice(1, 0, k).reshape({b * k});
    Tensor loss = main + 0.1 * nn::functional::cross_entropy(aux_logits, aux_target);
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.detach());
  }
  return values_of(losses);
}

struct SmallCnn : nn::Module {
  explicit SmallCnn(int64_t width, int64_t classes)
      : c1(3, width, 3, 1, 1, 1, 1, false), b1(width), c2(width, 2 * width, 3, 2, 1, 1, 1, false), b2(2 * width),
        fc(2 * width, classes) {
    for (auto [name, m] : std::vector<std::pair<const char*, nn::Module*>>{
             {"c1", &c1}, {"b1", &b1}, {"c2", &c2}, {"b2", &b2}, {"fc", &fc}})
      register_module(name, *m);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = nn::functional::relu(b1(c1(x)));
    h = nn::functional::relu(b2(c2(h)));
    return fc(nn::functional::adaptive_avg_pool2d(h, 1, 1).flatten(1));
  }
  nn::Conv2d c1;
  nn::BatchNorm2d b1;
  nn::Conv2d c2;
  nn::BatchNorm2d b2;
  nn::Linear fc;
};

// `examples` images per epoch in batches of `batch`: the last batch of each epoch is smaller.
inline std::vector<double> train_cnn_last_batch(Engine& engine, int steps, uint32_t seed = 1, int64_t examples = 150,
                                                int64_t batch = 16, int64_t size = 16, int64_t width = 16) {
  manual_seed(seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  const int64_t classes = 4;
  std::vector<float> images(static_cast<size_t>(examples * 3 * size * size));
  std::vector<int64_t> labels(static_cast<size_t>(examples));
  for (int64_t i = 0; i < examples; ++i) {
    int64_t k = int64_t(rng() % classes);
    labels[size_t(i)] = k;
    for (int64_t p = 0; p < 3 * size * size; ++p)
      images[size_t(i * 3 * size * size + p)] = float((p / size + k) % 4 == 0) + noise(rng);
  }
  SmallCnn model(width, classes);
  optim::SGD opt(model.parameters(), 0.05, 0.9);
  std::vector<Tensor> losses;
  int64_t at = 0;
  for (int s = 0; s < steps; ++s) {
    auto step = engine.step();
    int64_t n = std::min(batch, examples - at);
    std::vector<float> x(images.begin() + at * 3 * size * size, images.begin() + (at + n) * 3 * size * size);
    std::vector<int64_t> y(labels.begin() + at, labels.begin() + at + n);
    at = at + n == examples ? 0 : at + n;
    Tensor loss = nn::functional::cross_entropy(model(tensor(x, {n, 3, size, size})), tensor(y, {n}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.detach());
  }
  return values_of(losses);
}

}  // namespace terra::workloads
