#include "terra/ops/indexing.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "terra/backend/indexing_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/core/errors.h"
#include "terra/ops/arithmetic.h"
#include "terra/ops/views.h"

namespace terra {
namespace {

void check_index(const char* op, const Tensor& index, const char* what = "index") {
  if (!index.defined()) op_error(op, std::string(what) + " is undefined");
  if (index.dtype() != DType::Int64)
    op_error(op, std::string(what) + " must be int64, got " + dtype_name(index.dtype()) + " of shape " +
                     shape_str(index.shape()));
}

// ---- cat: any number of inputs, attr dim.
TensorMetas infer_cat(std::span<const Tensor> in, const Attrs& a) {
  if (in.empty()) op_error("cat", "needs at least one tensor");
  int64_t dim = a.i("dim");
  const Shape& s0 = in[0].shape();
  Shape out = s0;
  if (dim < 0 || dim >= int64_t(s0.size()))
    op_error("cat", "dim " + std::to_string(dim) + " is out of range for shape " + shape_str(s0));
  out[size_t(dim)] = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const Shape& s = in[k].shape();
    bool ok = s.size() == s0.size() && in[k].dtype() == in[0].dtype();
    for (size_t d = 0; ok && d < s.size(); ++d) ok = int64_t(d) == dim || s[d] == s0[d];
    if (!ok)
      op_error("cat", "tensor " + std::to_string(k) + " of shape " + shape_str(s) + " (" + dtype_name(in[k].dtype()) +
                          ") does not match tensor 0 of shape " + shape_str(s0) + " (" + dtype_name(in[0].dtype()) +
                          ") outside dim " + std::to_string(dim));
    out[size_t(dim)] = checked_add("cat", out[size_t(dim)], s[size_t(dim)], "size of dim " + std::to_string(dim));
  }
  return {{out, in[0].dtype()}};
}

TensorList grad_cat(const GradArgs& g) {
  int64_t dim = g.attrs.i("dim"), off = 0;
  TensorList out;
  for (const TensorMeta& m : g.in_meta) {
    int64_t len = m.shape[size_t(dim)];
    out.push_back(is_floating(m.dtype) ? slice(g.grad_out[0], dim, off, off + len) : Tensor());
    off += len;
  }
  return out;
}

const OpDef kCat{.name = "cat", .flags = 0, .infer = infer_cat, .kernel = kernels::cat, .grad = grad_cat};

// ---- index_select: inputs (x, index), attr dim.
TensorMetas infer_index_select(std::span<const Tensor> in, const Attrs& a) {
  check_index("index_select", in[1]);
  if (in[1].dim() > 1) op_error("index_select", "index must be 1-D, got shape " + shape_str(in[1].shape()));
  Shape s = in[0].shape();
  s[size_t(a.i("dim"))] = in[1].numel();
  return {{s, in[0].dtype()}};
}

TensorList grad_index_select(const GradArgs& g) {
  return {index_select_backward(g.grad_out[0], g.in_meta[0].shape, g.attrs.i("dim"), g.in[1]), Tensor()};
}

// ---- index_select_backward: inputs (grad, index), attrs dim, shape.
TensorMetas infer_index_select_bw(std::span<const Tensor> in, const Attrs& a) {
  check_index("index_select_backward", in[1]);
  Shape want = a.ints("shape");
  int64_t dim = a.i("dim");
  if (dim < 0 || dim >= int64_t(want.size()))
    op_error("index_select_backward", "dim out of range for " + shape_str(want));
  want[size_t(dim)] = in[1].numel();
  if (in[0].shape() != want || !is_floating(in[0].dtype()))
    op_error("index_select_backward", "grad of shape " + shape_str(in[0].shape()) + " does not fit input shape " +
                                          shape_str(a.ints("shape")) + " and " + std::to_string(in[1].numel()) +
                                          " indices");
  return {{a.ints("shape"), in[0].dtype()}};
}

TensorList grad_index_select_bw(const GradArgs& g) {
  return {index_select(g.grad_out[0], g.attrs.i("dim"), g.in[1]), Tensor()};
}

const OpDef kIndexSelect{.name = "index_select", .flags = kSaveInputs, .infer = infer_index_select,
                         .kernel = kernels::index_select, .grad = grad_index_select,
                         .check_values = kernels::index_select_values, .check_inputs = 1u << 1};
const OpDef kIndexSelectBackward{.name = "index_select_backward", .flags = kSaveInputs,
                                 .infer = infer_index_select_bw, .kernel = kernels::index_select_backward,
                                 .grad = grad_index_select_bw,
                                 .check_values = kernels::index_select_backward_values, .check_inputs = 1u << 1};

// ---- gather: inputs (x, index), attr dim. Output has index's shape.
void check_gather_shapes(const char* op, const Shape& xs, const Tensor& index, int64_t dim) {
  check_index(op, index);
  const Shape& is = index.shape();
  bool ok = is.size() == xs.size();
  for (size_t d = 0; ok && d < is.size(); ++d) ok = int64_t(d) == dim || is[d] <= xs[d];
  if (!ok)
    op_error(op, "index of shape " + shape_str(is) + " does not fit input of shape " + shape_str(xs) +
                     " (same rank, no larger outside dim " + std::to_string(dim) + ")");
}

TensorMetas infer_gather(std::span<const Tensor> in, const Attrs& a) {
  check_gather_shapes("gather", in[0].shape(), in[1], a.i("dim"));
  return {{in[1].shape(), in[0].dtype()}};
}

TensorList grad_gather(const GradArgs& g) {
  return {gather_backward(g.grad_out[0], g.in_meta[0].shape, g.attrs.i("dim"), g.in[1]), Tensor()};
}

// ---- gather_backward: inputs (grad, index), attrs dim, shape: scatter-add into zeros.
TensorMetas infer_gather_bw(std::span<const Tensor> in, const Attrs& a) {
  const Shape& s = a.ints("shape");
  int64_t dim = a.i("dim");
  if (dim < 0 || dim >= int64_t(s.size())) op_error("gather_backward", "dim out of range for " + shape_str(s));
  check_gather_shapes("gather_backward", s, in[1], dim);
  if (in[0].shape() != in[1].shape() || !is_floating(in[0].dtype()))
    op_error("gather_backward",
             "grad of shape " + shape_str(in[0].shape()) + " must have the index's shape " + shape_str(in[1].shape()));
  return {{s, in[0].dtype()}};
}

TensorList grad_gather_bw(const GradArgs& g) {
  return {gather(g.grad_out[0], g.attrs.i("dim"), g.in[1]), Tensor()};
}

const OpDef kGather{.name = "gather", .flags = kSaveInputs, .infer = infer_gather, .kernel = kernels::gather,
                    .grad = grad_gather, .check_values = kernels::gather_values, .check_inputs = 1u << 1};
const OpDef kGatherBackward{.name = "gather_backward", .flags = kSaveInputs, .infer = infer_gather_bw,
                            .kernel = kernels::gather_backward, .grad = grad_gather_bw,
                            .check_values = kernels::gather_backward_values, .check_inputs = 1u << 1};

// ---- embedding: inputs (weight, indices), attrs padding_idx (-1: none), mask_padding (rows at
// padding_idx read as zeros: the adjoint of embedding_backward; false for the public op).
TensorMetas infer_embedding(std::span<const Tensor> in, const Attrs&) {
  if (in[0].dim() != 2) op_error("embedding", "weight must be 2-D [num, dim], got shape " + shape_str(in[0].shape()));
  check_index("embedding", in[1], "indices");
  Shape s = in[1].shape();
  s.push_back(in[0].shape()[1]);
  return {{s, in[0].dtype()}};
}

TensorList grad_embedding(const GradArgs& g) {
  return {embedding_backward(g.grad_out[0], g.in[1], g.in_meta[0].shape[0], g.attrs.i("padding_idx")), Tensor()};
}

const OpDef kEmbedding{.name = "embedding", .flags = kSaveInputs, .infer = infer_embedding,
                       .kernel = kernels::embedding, .grad = grad_embedding,
                       .check_values = kernels::embedding_values, .check_inputs = 1u << 1};

// ---- embedding_backward: inputs (grad, indices), attrs num, padding_idx.
TensorMetas infer_embedding_bw(std::span<const Tensor> in, const Attrs& a) {
  check_index("embedding_backward", in[1], "indices");
  Shape want = in[1].shape();
  bool ok = in[0].dim() == in[1].dim() + 1 && is_floating(in[0].dtype());
  if (ok) {
    want.push_back(in[0].shape().back());
    ok = want == in[0].shape();
  }
  if (!ok)
    op_error("embedding_backward", "grad of shape " + shape_str(in[0].shape()) + " does not fit indices of shape " +
                                       shape_str(in[1].shape()));
  return {{{a.i("num"), in[0].shape().back()}, in[0].dtype()}};
}

TensorList grad_embedding_bw(const GradArgs& g) {
  Attrs a{{"padding_idx", g.attrs.i("padding_idx")}, {"mask_padding", true}};
  return {dispatch1(kEmbedding, {g.grad_out[0], g.in[1]}, a), Tensor()};
}

const OpDef kEmbeddingBackward{.name = "embedding_backward", .flags = kSaveInputs, .infer = infer_embedding_bw,
                               .kernel = kernels::embedding_backward, .grad = grad_embedding_bw,
                               .check_values = kernels::embedding_backward_values, .check_inputs = 1u << 1};

OpRegistrar r1(kCat), r2(kIndexSelect), r3(kIndexSelectBackward), r4(kGather), r5(kGatherBackward),
    r6(kEmbedding), r7(kEmbeddingBackward);

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) op_error("cat", "needs at least one tensor");
  int64_t rank = -1;
  DType dt = DType::Bool;
  bool first = true;
  for (size_t k = 0; k < tensors.size(); ++k) {
    if (!tensors[k].defined()) op_error("cat", "tensor " + std::to_string(k) + " is undefined");
    dt = first ? tensors[k].dtype() : promote(dt, tensors[k].dtype());
    first = false;
    if (!(tensors[k].dim() == 1 && tensors[k].numel() == 0)) rank = std::max(rank, tensors[k].dim());
  }
  std::vector<Tensor> in;
  for (const Tensor& t : tensors) {
    if (rank > 1 && t.dim() == 1 && t.numel() == 0) continue;  // torch's legacy empty tensors
    in.push_back(t.dtype() == dt ? t : t.to(dt));
  }
  if (in[0].dim() == 0) op_error("cat", "zero-dimensional tensor 0 cannot be concatenated");
  dim = wrap_dim("cat", dim, in[0].dim());
  return dispatch1(kCat, std::move(in), Attrs{{"dim", dim}});
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) op_error("stack", "needs at least one tensor");
  for (size_t k = 0; k < tensors.size(); ++k) {
    if (!tensors[k].defined()) op_error("stack", "tensor " + std::to_string(k) + " is undefined");
    if (tensors[k].shape() != tensors[0].shape())
      op_error("stack", "tensor " + std::to_string(k) + " of shape " + shape_str(tensors[k].shape()) +
                            " differs from tensor 0 of shape " + shape_str(tensors[0].shape()));
  }
  dim = wrap_dim("stack", dim, tensors[0].dim() + 1);
  std::vector<Tensor> u;
  for (const Tensor& t : tensors) u.push_back(unsqueeze(t, dim));
  return cat(u, dim);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  if (!x.defined()) op_error("split", "input is undefined");
  if (x.dim() == 0) op_error("split", "cannot split a 0-d tensor");
  dim = wrap_dim("split", dim, x.dim());
  int64_t n = x.shape()[size_t(dim)];
  if (split_size < 0 || (split_size == 0 && n != 0))
    op_error("split",
             "split_size must be positive, got " + std::to_string(split_size) + " for shape " + shape_str(x.shape()));
  std::vector<Tensor> out;
  if (n == 0) return {slice(x, dim, 0, 0)};
  for (int64_t off = 0; off < n; off += split_size) out.push_back(slice(x, dim, off, off + std::min(n - off, split_size)));
  return out;
}

std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t dim) {
  if (!x.defined()) op_error("split", "input is undefined");
  if (x.dim() == 0) op_error("split", "cannot split a 0-d tensor");
  dim = wrap_dim("split", dim, x.dim());
  int64_t n = x.shape()[size_t(dim)], total = 0;
  for (int64_t s : sizes) {
    if (s < 0) op_error("split", "negative size in " + shape_str(sizes));
    total = checked_add("split", total, s, "sum of sizes " + shape_str(sizes));
  }
  if (total != n)
    op_error("split", "sizes " + shape_str(sizes) + " sum to " + std::to_string(total) + ", but dim " +
                          std::to_string(dim) + " of shape " + shape_str(x.shape()) + " has " + std::to_string(n));
  std::vector<Tensor> out;
  int64_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(x, dim, off, off + s));
    off += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  if (!x.defined()) op_error("chunk", "input is undefined");
  if (chunks <= 0) op_error("chunk", "chunks must be positive, got " + std::to_string(chunks));
  if (x.dim() == 0) op_error("chunk", "cannot chunk a 0-d tensor");
  dim = wrap_dim("chunk", dim, x.dim());
  int64_t n = x.shape()[size_t(dim)];
  if (n == 0) return std::vector<Tensor>(size_t(chunks), slice(x, dim, 0, 0));  // torch: `chunks` empty pieces
  return split(x, (n + chunks - 1) / chunks, dim);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  if (!x.defined()) op_error("index_select", "input is undefined");
  check_index("index_select", index);
  if (x.dim() == 0) op_error("index_select", "cannot index a 0-d tensor");
  dim = wrap_dim("index_select", dim, x.dim());
  return dispatch1(kIndexSelect, {x, index}, Attrs{{"dim", dim}});
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  if (!x.defined()) op_error("gather", "input is undefined");
  check_index("gather", index);
  if (x.dim() == 0) op_error("gather", "cannot index a 0-d tensor");
  dim = wrap_dim("gather", dim, x.dim());
  return dispatch1(kGather, {x, index}, Attrs{{"dim", dim}});
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  if (!weight.defined()) op_error("embedding", "weight is undefined");
  check_index("embedding", indices, "indices");
  if (weight.dim() != 2) op_error("embedding", "weight must be 2-D [num, dim], got shape " + shape_str(weight.shape()));
  int64_t num = weight.shape()[0], pad = -1;
  if (padding_idx) {
    pad = *padding_idx;
    if (pad < -num || pad >= num)
      op_error("embedding", "padding_idx " + std::to_string(pad) + " is out of range for weight of shape " +
                                shape_str(weight.shape()));
    if (pad < 0) pad += num;
  }
  return dispatch1(kEmbedding, {weight, indices}, Attrs{{"padding_idx", pad}, {"mask_padding", false}});
}

Tensor index_select_backward(const Tensor& grad, const Shape& in_shape, int64_t dim, const Tensor& index) {
  if (!grad.defined()) op_error("index_select_backward", "grad is undefined");
  check_index("index_select_backward", index);
  dim = wrap_dim("index_select_backward", dim, int64_t(in_shape.size()));
  return dispatch1(kIndexSelectBackward, {grad, index}, Attrs{{"dim", dim}, {"shape", in_shape}});
}

Tensor gather_backward(const Tensor& grad, const Shape& in_shape, int64_t dim, const Tensor& index) {
  if (!grad.defined()) op_error("gather_backward", "grad is undefined");
  check_index("gather_backward", index);
  dim = wrap_dim("gather_backward", dim, int64_t(in_shape.size()));
  return dispatch1(kGatherBackward, {grad, index}, Attrs{{"dim", dim}, {"shape", in_shape}});
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num, int64_t padding_idx) {
  if (!grad.defined()) op_error("embedding_backward", "grad is undefined");
  check_index("embedding_backward", indices, "indices");
  if (num < 0) op_error("embedding_backward", "negative table size " + std::to_string(num));
  return dispatch1(kEmbeddingBackward, {grad, indices}, Attrs{{"num", num}, {"padding_idx", padding_idx}});
}

}  // namespace terra
