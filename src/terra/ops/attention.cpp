#include "terra/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "terra/autograd/grad_mode.h"
#include "terra/backend/attention_kernels.h"
#include "terra/core/dispatch.h"
#include "terra/ops/reduce.h"

namespace terra {
namespace {

constexpr const char* kFwd = "scaled_dot_product_attention";
constexpr const char* kBwd = "scaled_dot_product_attention_backward";

// The shapes named in every error, so a message says which call it was.
std::string operands(std::span<const Tensor> in, const char* const* names) {
  std::string s = " (";
  for (size_t i = 0; i < in.size(); ++i) s += std::string(i ? ", " : "") + names[i] + " " + shape_str(in[i].shape());
  return s + ")";
}

// The broadcast of the dims before the last two of each operand; empty when they do not broadcast.
bool batch_shape(std::span<const Tensor> ts, Shape& out) {
  size_t rank = 0;
  for (auto& t : ts) rank = std::max(rank, size_t(t.dim() - 2));
  out.assign(rank, 1);
  for (auto& t : ts) {
    size_t r = size_t(t.dim() - 2), lead = rank - r;
    for (size_t d = 0; d < r; ++d) {
      int64_t n = t.shape()[d];
      int64_t& o = out[lead + d];
      if (n == o || n == 1) continue;
      if (o != 1) return false;
      o = n;
    }
  }
  return true;
}

// Checks q, k, v (at in[first..first+2]; `names` name every input in errors); returns the
// broadcast batch shape.
Shape check_qkv(const char* op, std::span<const Tensor> in, const char* const* names, size_t first) {
  const std::string ctx = operands(in, names);
  auto fail = [&](const std::string& what) { throw std::invalid_argument(std::string("[") + op + "] " + what + ctx); };
  const Tensor &q = in[first], &k = in[first + 1], &v = in[first + 2];
  if (!is_floating(q.dtype())) fail("q must be float32 or float64, got " + std::string(dtype_name(q.dtype())));
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    fail("q, k and v must have the same dtype, got " + std::string(dtype_name(q.dtype())) + ", " +
         dtype_name(k.dtype()) + " and " + dtype_name(v.dtype()));
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2) fail("q, k and v must have at least 2 dims [..., S, D]");
  if (q.shape().back() != k.shape().back()) fail("q and k must have the same last dim D");
  if (k.shape()[size_t(k.dim() - 2)] != v.shape()[size_t(v.dim() - 2)]) fail("k and v must have the same length Sk");
  Shape batch;
  if (!batch_shape(in.subspan(first, 3), batch)) fail("the batch dims of q, k and v do not broadcast");
  return batch;
}

Shape with(Shape batch, int64_t a, int64_t b) {
  batch.push_back(a);
  batch.push_back(b);
  return batch;
}

// A mask must be bool (or, when `additive`, q's floating dtype) and broadcast to `scores`.
void check_mask(const char* op, std::span<const Tensor> in, const char* const* names, const Tensor& m, DType qt,
                const Shape& scores, bool additive) {
  const std::string ctx = operands(in, names);
  if (m.dtype() != DType::Bool && (!additive || m.dtype() != qt))
    throw std::invalid_argument(std::string("[") + op + "] attn_mask must be bool" +
                                (additive ? std::string(" or ") + dtype_name(qt) + " like q" : std::string()) +
                                ", got " + dtype_name(m.dtype()) + ctx);
  bool ok = m.dim() <= int64_t(scores.size());
  for (int64_t d = 0; ok && d < m.dim(); ++d) {
    int64_t n = m.shape()[size_t(d)], want = scores[size_t(int64_t(scores.size()) - m.dim() + d)];
    ok = n == want || n == 1;
  }
  if (!ok)
    throw std::invalid_argument(std::string("[") + op + "] attn_mask does not broadcast to the scores' shape " +
                                shape_str(scores) + ctx);
}

// ---------------------------------------------------------------- forward
TensorMetas infer_sdpa(std::span<const Tensor> in, const Attrs& a) {
  static const char* const names[] = {"q", "k", "v", "attn_mask"};
  if (in.size() != 3 && in.size() != 4) throw std::invalid_argument("[scaled_dot_product_attention] internal: wrong number of inputs");
  Shape batch = check_qkv(kFwd, in, names, 0);
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const int64_t Sq = q.shape()[size_t(q.dim() - 2)], Sk = k.shape()[size_t(k.dim() - 2)], Dv = v.shape().back();
  const Shape scores = with(batch, Sq, Sk);
  if (in.size() == 4) check_mask(kFwd, in, names, in[3], q.dtype(), scores, true);
  const bool save = a.b("save_weights");
  return {{with(batch, Sq, Dv), q.dtype()}, {save ? scores : Shape{0}, q.dtype()}};
}

TensorList grad_sdpa(const GradArgs& g) {
  if (!g.grad_out[0].defined()) return {};  // only the weights were used: they are not exposed
  const bool has_mask = g.in.size() == 4, scores_grad = g.attrs.b("scores_grad");
  if (g.out[1].dim() != g.out[0].dim())  // [0]: the call decided no gradient was needed
    throw std::runtime_error("[scaled_dot_product_attention] internal: weights were not saved for the gradient");
  // A bool mask goes to the backward: no gradient reaches a masked score (as masked_fill's).
  const Tensor bool_mask = has_mask && g.in[3].dtype() == DType::Bool ? g.in[3] : Tensor();
  std::vector<Tensor> r = scaled_dot_product_attention_backward(g.grad_out[0], g.in[0], g.in[1], g.in[2], g.out[1],
                                                                bool_mask, g.attrs.b("is_causal"),
                                                                g.attrs.f("scale"), scores_grad);
  // Broadcast operands get their gradients summed back to their own shapes.
  TensorList out;
  for (size_t i = 0; i < 3; ++i) out.push_back(sum_to(r[i], g.in_meta[i].shape));
  if (has_mask) out.push_back(scores_grad ? sum_to(r[3], g.in_meta[3].shape) : Tensor());
  return out;
}

// ---------------------------------------------------------------- backward
TensorMetas infer_sdpa_backward(std::span<const Tensor> in, const Attrs& a) {
  static const char* const names[] = {"grad_out", "q", "k", "v", "weights", "attn_mask"};
  if (in.size() != 5 && in.size() != 6) throw std::invalid_argument("[scaled_dot_product_attention_backward] internal: wrong number of inputs");
  Shape batch = check_qkv(kBwd, in, names, 1);
  const Tensor &go = in[0], &q = in[1], &k = in[2], &v = in[3], &w = in[4];
  const int64_t Sq = q.shape()[size_t(q.dim() - 2)], Sk = k.shape()[size_t(k.dim() - 2)];
  const int64_t D = q.shape().back(), Dv = v.shape().back();
  const std::string ctx = operands(in, names);
  if (go.shape() != with(batch, Sq, Dv) || go.dtype() != q.dtype())
    throw std::invalid_argument(std::string("[") + kBwd + "] grad_out must be " + dtype_name(q.dtype()) + " " +
                                shape_str(with(batch, Sq, Dv)) + ctx);
  if (w.shape() != with(batch, Sq, Sk) || w.dtype() != q.dtype())
    throw std::invalid_argument(std::string("[") + kBwd + "] weights must be " + dtype_name(q.dtype()) + " " +
                                shape_str(with(batch, Sq, Sk)) + ctx);
  if (in.size() == 6) check_mask(kBwd, in, names, in[5], q.dtype(), with(batch, Sq, Sk), false);
  TensorMetas out{{with(batch, Sq, D), q.dtype()}, {with(batch, Sk, D), q.dtype()},
                              {with(batch, Sk, Dv), q.dtype()}};
  if (a.b("scores_grad")) out.push_back({with(batch, Sq, Sk), q.dtype()});
  return out;
}

// Multiply-adds: q·kᵀ and weights·v, each over every (query, key) pair; backward about twice that.
int64_t work_sdpa(std::span<const Tensor> in, std::span<const TensorMeta>, const Attrs&) {
  const Shape& q = in[0].shape();
  const Shape& k = in[1].shape();
  const Shape& v = in[2].shape();
  return in[0].numel() / std::max<int64_t>(q.back(), 1) * k[k.size() - 2] * (q.back() + v.back());
}
int64_t work_sdpa_backward(std::span<const Tensor> in, std::span<const TensorMeta> out, const Attrs& a) {
  return 2 * work_sdpa(in.subspan(1), out, a);  // in[0]: grad_out, then q, k, v
}

const OpDef kSdpa{.name = kFwd, .flags = kSaveInputs | kSaveOutputs, .infer = infer_sdpa,
                  .kernel = kernels::scaled_dot_product_attention, .grad = grad_sdpa, .work = work_sdpa};
// No gradient of the gradient (as layer_norm_backward): its outputs do not require grad.
const OpDef kSdpaBackward{.name = kBwd, .infer = infer_sdpa_backward,
                          .kernel = kernels::scaled_dot_product_attention_backward, .work = work_sdpa_backward};
OpRegistrar r1(kSdpa), r2(kSdpaBackward);

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    bool is_causal, std::optional<double> scale) {
  const char* names[] = {"q", "k", "v"};
  const Tensor* ts[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i)
    if (!ts[i]->defined()) throw std::invalid_argument(std::string("[") + kFwd + "] " + names[i] + " is undefined");
  std::vector<Tensor> in{q, k, v};
  if (attn_mask.defined()) {
    // A floating mask of another precision is added in q's, as the scores would be promoted to it.
    bool convert = is_floating(attn_mask.dtype()) && is_floating(q.dtype()) && attn_mask.dtype() != q.dtype();
    in.push_back(convert ? attn_mask.to(q.dtype()) : attn_mask);
  }
  const int64_t D = q.dim() > 0 ? q.shape().back() : 0;
  const double s = scale ? *scale : 1.0 / std::sqrt(double(D));
  // The weights are kept only for a gradient: inference never writes the [..., Sq, Sk] tensor.
  bool need_grad = false;
  if (grad_enabled())
    for (auto& t : in) need_grad |= is_floating(t.dtype()) && t.requires_grad();
  const bool scores_grad = need_grad && in.size() == 4 && is_floating(in[3].dtype()) && in[3].requires_grad();
  return dispatch(kSdpa, std::move(in),
                  Attrs{{"scale", s}, {"is_causal", is_causal}, {"save_weights", need_grad}, {"scores_grad", scores_grad}})[0];
}

std::vector<Tensor> scaled_dot_product_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                                          const Tensor& v, const Tensor& weights, const Tensor& bool_mask,
                                                          bool is_causal, double scale, bool scores_grad) {
  std::vector<Tensor> in{grad_out, q, k, v, weights};
  if (bool_mask.defined()) in.push_back(bool_mask);
  return dispatch(kSdpaBackward, std::move(in),
                  Attrs{{"scale", scale}, {"is_causal", is_causal}, {"scores_grad", scores_grad}});
}

}  // namespace terra
