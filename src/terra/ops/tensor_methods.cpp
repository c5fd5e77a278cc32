// Tensor's op methods (reshape, sum, add_, ...): torch-style spellings of the free functions in
// ops/, defined here so that core/ (Tensor, dispatch) does not depend on the ops built on it.
#include "terra/core/tensor.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/creation.h"
#include "terra/ops/reduce.h"
#include "terra/ops/views.h"

namespace terra {

Tensor Tensor::reshape(Shape s) const { return terra::reshape(*this, std::move(s)); }
Tensor Tensor::view(Shape s) const { return terra::view(*this, std::move(s)); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return terra::transpose(*this, a, b); }
Tensor Tensor::permute(std::vector<int64_t> dims) const { return terra::permute(*this, std::move(dims)); }
Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t st) const { return terra::slice(*this, d, s, e, st); }
Tensor Tensor::select(int64_t d, int64_t i) const { return terra::select(*this, d, i); }
Tensor Tensor::expand(Shape s) const { return terra::expand(*this, std::move(s)); }
Tensor Tensor::squeeze(int64_t d) const { return terra::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return terra::unsqueeze(*this, d); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return terra::flatten(*this, s, e); }
Tensor Tensor::contiguous() const { return terra::contiguous(*this); }
Tensor Tensor::clone() const { return terra::clone(*this); }
Tensor Tensor::to(DType d) const { return terra::cast(*this, d); }
Tensor Tensor::sum() const { return terra::sum(*this); }
Tensor Tensor::sum(std::vector<int64_t> dims, bool keepdim) const { return terra::sum(*this, std::move(dims), keepdim); }
Tensor Tensor::mean() const { return terra::mean(*this); }
Tensor Tensor::mean(std::vector<int64_t> dims, bool keepdim) const {
  return terra::mean(*this, std::move(dims), keepdim);
}

const Tensor& Tensor::add_(const Tensor& o, double alpha) const {
  add_inplace(*this, alpha == 1.0 ? o : mul(o, alpha));
  return *this;
}
const Tensor& Tensor::add_(double v) const {
  add_inplace(*this, scalar_like(*this, v));
  return *this;
}
const Tensor& Tensor::sub_(const Tensor& o) const {
  sub_inplace(*this, o);
  return *this;
}
const Tensor& Tensor::mul_(const Tensor& o) const {
  mul_inplace(*this, o);
  return *this;
}
const Tensor& Tensor::mul_(double v) const {
  mul_inplace(*this, scalar_like(*this, v));
  return *this;
}
const Tensor& Tensor::div_(const Tensor& o) const {
  div_inplace(*this, o);
  return *this;
}
const Tensor& Tensor::copy_(const Tensor& src) const {
  copy_inplace(*this, src);
  return *this;
}
const Tensor& Tensor::zero_() const {
  fill_inplace(*this, 0.0);
  return *this;
}
const Tensor& Tensor::fill_(double v) const {
  fill_inplace(*this, v);
  return *this;
}

}  // namespace terra
