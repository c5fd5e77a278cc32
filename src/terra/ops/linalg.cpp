#include "terra/ops/linalg.h"

#include <stdexcept>
#include <string>

#include "terra/backend/matmul_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/ops/reduce.h"
#include "terra/ops/views.h"

namespace terra {
namespace {

TensorMetas infer_matmul(std::span<const Tensor> in, const Attrs&) {
  const Shape &a = in[0].shape(), &b = in[1].shape();
  if (in[0].dtype() != in[1].dtype())
    throw std::invalid_argument(std::string("[matmul] dtypes ") + dtype_name(in[0].dtype()) + " and " +
                                dtype_name(in[1].dtype()) + " differ");
  if (in[0].dtype() == DType::Bool) throw std::invalid_argument("[matmul] bool tensors are not supported");
  if (a.size() < 2 || b.size() < 2)
    throw std::invalid_argument("[matmul] internal: operands must be at least 2-D");
  if (a.back() != b[b.size() - 2])
    throw std::invalid_argument("[matmul] shapes " + shape_str(a) + " and " + shape_str(b) +
                                " cannot be multiplied (" + std::to_string(a.back()) + " != " +
                                std::to_string(b[b.size() - 2]) + ")");
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  Shape s = broadcast_shapes("matmul", ba, bb);
  s.push_back(a[a.size() - 2]);
  s.push_back(b.back());
  return {{s, in[0].dtype()}};
}

TensorList grad_matmul(const GradArgs& g) {
  return matmul_backward(g.grad_out[0], g.in[0], g.in[1], g.in_meta[0].shape, g.in_meta[1].shape);
}

// Multiply-adds: every output element sums K products (K: the last dim of the first operand).
int64_t work_matmul(std::span<const Tensor> in, std::span<const TensorMeta> out, const Attrs&) {
  return numel_of(out[0].shape) * (in[0].dim() > 0 ? in[0].shape().back() : 1);
}

const OpDef kMatmul{.name = "matmul", .flags = kSaveInputs, .infer = infer_matmul, .kernel = kernels::matmul,
                    .grad = grad_matmul, .work = work_matmul};
OpRegistrar r1(kMatmul);

}  // namespace

TensorList matmul_backward(const Tensor& go, const Tensor& a, const Tensor& b, const Shape& a_shape,
                           const Shape& b_shape) {
  Tensor ga = matmul(go, transpose(b, -1, -2));
  Tensor gb;
  if (b.dim() == 2 && a.dim() == 2 && b.impl()->strides[0] == 1 && b.shape()[0] > 1 && b.shape()[1] > 1)
    // b is a transposed view (Linear's w.t()): computing its grad transposed gives it b's layout,
    // so w's grad comes out contiguous instead of needing a transposing copy.
    gb = transpose(matmul(transpose(go, -1, -2), a), -1, -2);
  else
    gb = matmul(transpose(a, -1, -2), go);
  return {sum_to(ga, a_shape), sum_to(gb, b_shape)};
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) throw std::invalid_argument("[matmul] input is undefined");
  if (a.dim() == 0 || b.dim() == 0)
    throw std::invalid_argument("[matmul] both operands need at least one dim; got shapes " + shape_str(a.shape()) +
                                " and " + shape_str(b.shape()));
  Tensor x = a.dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor y = b.dim() == 1 ? unsqueeze(b, 1) : b;
  // No promotion (torch raises too): a float64 or int64 operand is a bug in the caller's model.
  if (x.dtype() != y.dtype())
    throw std::invalid_argument(std::string("[matmul] dtypes ") + dtype_name(a.dtype()) + " and " +
                                dtype_name(b.dtype()) + " differ; shapes " + shape_str(a.shape()) + " and " +
                                shape_str(b.shape()) + " (cast one of them)");
  Tensor r = dispatch1(kMatmul, {x, y});
  if (b.dim() == 1) r = squeeze(r, -1);
  if (a.dim() == 1) r = squeeze(r, a.dim() == 1 && b.dim() == 1 ? -1 : -2);
  return r;
}

}  // namespace terra
