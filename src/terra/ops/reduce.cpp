#include "terra/ops/reduce.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "terra/backend/reduce_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/views.h"

namespace terra {

std::vector<int64_t> reduction_dims(const char* op, std::vector<int64_t> dims, int64_t rank) {
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    return dims;
  }
  for (auto& d : dims) d = wrap_dim(op, d, rank);
  std::sort(dims.begin(), dims.end());
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end())
    throw std::invalid_argument(std::string("[") + op + "] dim appears more than once in " + shape_str(dims));
  if (rank == 0) dims.clear();  // dim 0 / -1 of a 0-d tensor reduces nothing
  return dims;
}

Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  size_t j = 0;
  for (size_t d = 0; d < s.size(); ++d) {
    bool r = j < dims.size() && dims[j] == int64_t(d);
    if (r) ++j;
    if (!r) out.push_back(s[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

namespace {

TensorMetas infer_sum(std::span<const Tensor> in, const Attrs& a) {
  DType d = is_floating(in[0].dtype()) ? in[0].dtype() : DType::Int64;
  return {{reduced_shape(in[0].shape(), a.ints("dims"), a.b("keepdim")), d}};
}

TensorList grad_sum(const GradArgs& g) {
  const Shape& in = g.in_meta[0].shape;
  Tensor go = g.grad_out[0];
  if (!g.attrs.b("keepdim")) go = reshape(go, reduced_shape(in, g.attrs.ints("dims"), true));
  return {expand(go, in)};
}

const OpDef kSum{.name = "sum", .flags = 0, .infer = infer_sum, .kernel = kernels::sum, .grad = grad_sum};
OpRegistrar r1(kSum);

}  // namespace

Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  if (!x.defined()) throw std::invalid_argument("[sum] input is undefined");
  dims = reduction_dims("sum", std::move(dims), x.dim());
  return dispatch1(kSum, {x}, Attrs{{"dims", dims}, {"keepdim", keepdim}});
}

Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  if (!x.defined()) throw std::invalid_argument("[mean] input is undefined");
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string("[mean] needs a floating tensor, got ") + dtype_name(x.dtype()) +
                                " of shape " + shape_str(x.shape()));
  dims = reduction_dims("mean", std::move(dims), x.dim());
  int64_t n = 1;
  for (int64_t d : dims) n *= x.shape()[size_t(d)];
  return div(sum(x, dims, keepdim), double(n));
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  std::vector<int64_t> dims;
  int64_t lead = x.dim() - int64_t(shape.size());
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d < lead || (shape[size_t(d - lead)] == 1 && x.shape()[size_t(d)] != 1)) dims.push_back(d);
  if (dims.empty()) return reshape(x, shape);
  // Only leading dims summed away (a bias's gradient): keepdim=false gives `shape` itself, with no
  // reshape after it (one op fewer; the kernel's sums are the same, keepdim only shapes the output).
  bool leading_only = lead > 0 && dims.size() == size_t(lead);
  if (leading_only)
    for (size_t i = 0; i < shape.size(); ++i) leading_only &= shape[i] == x.shape()[size_t(lead) + i];
  if (leading_only) return dispatch1(kSum, {x}, Attrs{{"dims", dims}, {"keepdim", false}});
  return reshape(dispatch1(kSum, {x}, Attrs{{"dims", dims}, {"keepdim", true}}), shape);
}

}  // namespace terra
