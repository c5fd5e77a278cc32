// Helpers shared by the ten programs: host-side generated data and the per-step loss log. Only
// host code lives here; every tensor op stays in the program that calls it.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <terra/nn.h>
#include <terra/optim.h>

#include "program.h"

namespace terra::programs::detail {

// Host random numbers for generating data sets (the programs make their own data, no downloads).
class HostRng {
 public:
  explicit HostRng(uint64_t seed) : gen_(uint32_t(seed * 2654435761u + 12345u)) {}
  float normal(float stddev = 1.0f) { return std::normal_distribution<float>(0.0f, stddev)(gen_); }
  float uniform(float lo = 0.0f, float hi = 1.0f) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  int64_t integer(int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }
  std::mt19937& engine() { return gen_; }

 private:
  std::mt19937 gen_;
};

// Records each step's loss. The value is fetched right away only when the caller asked for a
// progress callback; otherwise the host keeps running ahead and fetches everything at the end.
// The loss is detached so the step's autograd graph is not kept alive. A program makes its LossLog
// right before its training loop: that marks the loop's start (RunOptions::on_loop_start).
class LossLog {
 public:
  explicit LossLog(const RunOptions& opts) : opts_(opts) {
    if (opts_.on_loop_start) opts_.on_loop_start();
  }
  void record(int step, const Tensor& loss) {
    losses_.push_back(loss.detach());
    if (opts_.on_step) {
      double v = losses_.back().item<double>();
      fetched_.resize(losses_.size(), NAN);
      fetched_.back() = v;
      opts_.on_step(step, v);
    }
  }
  // For programs that read the loss on the host themselves.
  void record_value(int step, double v) {
    values_.push_back(v);
    if (opts_.on_step) opts_.on_step(step, v);
  }
  RunResult finish() {
    RunResult r;
    if (!values_.empty()) {
      r.losses = values_;
    } else {
      for (size_t i = 0; i < losses_.size(); ++i)
        r.losses.push_back(i < fetched_.size() ? fetched_[i] : losses_[i].item<double>());
    }
    if (!r.losses.empty()) {
      r.first_loss = r.losses.front();
      r.final_loss = r.losses.back();
    }
    return r;
  }

 private:
  const RunOptions& opts_;
  std::vector<Tensor> losses_;
  std::vector<double> fetched_;
  std::vector<double> values_;
};

// A transformer encoder block (post-norm, as BERT): self-attention and a GELU MLP, each with a
// residual connection and LayerNorm. With causal = true it is a decoder block (GPT-2 style, pre-norm).
class TransformerBlock : public nn::Module {
 public:
  TransformerBlock(int64_t d, int64_t heads, int64_t ff, bool pre_norm)
      : attn(d, heads), ln1(d), ln2(d), fc1(d, ff), fc2(ff, d), pre_norm(pre_norm) {
    register_module("attn", attn);
    register_module("ln1", ln1);
    register_module("ln2", ln2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask = {}) {
    if (pre_norm) {
      Tensor h = ln1(x);
      Tensor y = x + attn(h, h, h, attn_mask, key_padding_mask);
      return y + fc2(nn::functional::gelu(fc1(ln2(y))));
    }
    Tensor y = ln1(x + attn(x, x, x, attn_mask, key_padding_mask));
    return ln2(y + fc2(nn::functional::gelu(fc1(y))));
  }
  using nn::Module::forward;

  nn::MultiheadAttention attn;
  nn::LayerNorm ln1, ln2;
  nn::Linear fc1, fc2;
  bool pre_norm;
};

}  // namespace terra::programs::detail
