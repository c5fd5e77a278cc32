#include "terra/ops/loss_common.h"

#include <stdexcept>

namespace terra::loss {

int64_t reduction_code(const char* op, const std::string& r) {
  if (r == "none") return kNone;
  if (r == "mean") return kMean;
  if (r == "sum") return kSum;
  throw std::invalid_argument(std::string("[") + op + "] reduction must be \"mean\", \"sum\" or \"none\", got \"" + r +
                              "\"");
}

Shape target_shape_for(const Shape& in) {
  if (in.size() <= 1) return {};
  Shape t = in;
  t.erase(t.begin() + 1);
  return t;
}

void check_nll_inputs(const char* op, const Tensor& x, const Tensor& t) {
  if (!x.defined() || !t.defined()) throw std::invalid_argument(std::string("[") + op + "] input is undefined");
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string("[") + op + "] input must be floating, got " + dtype_name(x.dtype()) +
                                " of shape " + shape_str(x.shape()));
  if (t.dtype() != DType::Int64)
    throw std::invalid_argument(std::string("[") + op + "] targets must be int64 class indices, got " +
                                dtype_name(t.dtype()) + " of shape " + shape_str(t.shape()));
  if (x.dim() < 1)
    throw std::invalid_argument(std::string("[") + op + "] input must have a class dim, got shape " +
                                shape_str(x.shape()));
  if (t.shape() != target_shape_for(x.shape()))
    throw std::invalid_argument(std::string("[") + op + "] input of shape " + shape_str(x.shape()) +
                                " expects targets of shape " + shape_str(target_shape_for(x.shape())) + ", got " +
                                shape_str(t.shape()));
}

NllLayout nll_layout(const Shape& s) {
  NllLayout l;
  if (s.size() == 1) {
    l.c = s[0];
    return l;
  }
  l.n = s[0];
  l.c = s[1];
  for (size_t d = 2; d < s.size(); ++d) l.r *= s[d];
  return l;
}

kernels::XentShape xent_shape(const Shape& s, const Attrs& a, int64_t used) {
  NllLayout l = nll_layout(s);
  return {.n = l.n, .c = l.c, .r = l.r, .ignore = a.i("ignore_index"), .reduction = a.i("reduction"), .used = used};
}

}  // namespace terra::loss
