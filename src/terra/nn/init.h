// Parameter initialization (torch.nn.init). Each fills its tensor in place under NoGradGuard using
// terra's counter-based random ops, so manual_seed makes initialization reproducible.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "terra/core/tensor.h"

namespace terra::nn::init {

// (fan_in, fan_out) of a weight: dim 1 / dim 0 times the receptive field (product of dims 2..).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
// torch.nn.init.calculate_gain for "linear", "conv2d", "sigmoid", "tanh", "relu", "leaky_relu".
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

void uniform_(const Tensor& t, double low = 0.0, double high = 1.0);
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0);
void constant_(const Tensor& t, double value);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
// mode: "fan_in" or "fan_out"; nonlinearity as in calculate_gain (a is leaky_relu's slope).
void kaiming_uniform_(const Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                      const std::string& nonlinearity = "leaky_relu");
void kaiming_normal_(const Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                     const std::string& nonlinearity = "leaky_relu");
void xavier_uniform_(const Tensor& t, double gain = 1.0);
void xavier_normal_(const Tensor& t, double gain = 1.0);

}  // namespace terra::nn::init
