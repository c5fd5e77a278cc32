#include "terra/ops/linear.h"

#include <stdexcept>
#include <string>

#include "terra/ops/arithmetic.h"
#include "terra/ops/linalg.h"
#include "terra/ops/views.h"

namespace terra {

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  if (!x.defined()) throw std::invalid_argument("[linear] input is undefined");
  if (!w.defined()) throw std::invalid_argument("[linear] weight is undefined");
  if (x.dim() < 1)
    throw std::invalid_argument("[linear] input must have at least 1 dim, got shape " + shape_str(x.shape()));
  if (w.dim() != 2)
    throw std::invalid_argument("[linear] weight must be 2-D [out, in], got shape " + shape_str(w.shape()));
  if (x.shape().back() != w.shape()[1])
    throw std::invalid_argument("[linear] input of shape " + shape_str(x.shape()) + " has " +
                                std::to_string(x.shape().back()) + " features but weight of shape " +
                                shape_str(w.shape()) + " expects " + std::to_string(w.shape()[1]));
  if (b.defined() && b.shape() != Shape{w.shape()[0]})
    throw std::invalid_argument("[linear] bias of shape " + shape_str(b.shape()) + " does not match weight of shape " +
                                shape_str(w.shape()) + " (expected [" + std::to_string(w.shape()[0]) + "])");
  if (x.dtype() != w.dtype() || (b.defined() && b.dtype() != x.dtype()))
    throw std::invalid_argument(std::string("[linear] dtype mismatch: input ") + dtype_name(x.dtype()) + " " +
                                shape_str(x.shape()) + ", weight " + dtype_name(w.dtype()) + " " + shape_str(w.shape()) +
                                (b.defined() ? std::string(", bias ") + dtype_name(b.dtype()) : std::string()));
  if (x.dtype() == DType::Bool) throw std::invalid_argument("[linear] bool tensors are not supported");
  Tensor y = matmul(x, transpose(w, 0, 1));
  return b.defined() ? add(y, b) : y;
}

}  // namespace terra
