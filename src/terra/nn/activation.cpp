#include "terra/nn/activation.h"

#include <stdexcept>

#include "terra/ops/elementwise.h"
#include "terra/ops/softmax.h"

namespace terra::nn {

Tensor ReLU::forward(const Tensor& x) { return terra::relu(x); }
Tensor LeakyReLU::forward(const Tensor& x) { return terra::leaky_relu(x, negative_slope); }

GELU::GELU(std::string approx) : approximate(std::move(approx)) {
  if (approximate != "none" && approximate != "tanh")
    throw std::invalid_argument("[nn::GELU] approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
}
Tensor GELU::forward(const Tensor& x) { return terra::gelu(x, approximate == "tanh"); }

Tensor Tanh::forward(const Tensor& x) { return terra::tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return terra::sigmoid(x); }
Tensor Softmax::forward(const Tensor& x) { return terra::softmax(x, dim); }
Tensor LogSoftmax::forward(const Tensor& x) { return terra::log_softmax(x, dim); }

}  // namespace terra::nn
