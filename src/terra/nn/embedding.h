// Embedding: a lookup table weight [num_embeddings, embedding_dim], initialized N(0, 1).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "terra/nn/init.h"
#include "terra/nn/module.h"
#include "terra/ops/indexing.h"

namespace terra::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
    if (num_embeddings <= 0 || embedding_dim <= 0)
      throw std::invalid_argument("[nn::Embedding] sizes must be positive, got " + std::to_string(num_embeddings) +
                                  " and " + std::to_string(embedding_dim));
    weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
    init::normal_(weight, 0.0, 1.0);
  }
  // indices: int64 of any shape; returns [*indices.shape, embedding_dim].
  Tensor forward(const Tensor& indices) override { return terra::embedding(weight, indices); }
  std::string name() const override { return "Embedding"; }

  int64_t num_embeddings, embedding_dim;
  Tensor weight;
};

}  // namespace terra::nn
