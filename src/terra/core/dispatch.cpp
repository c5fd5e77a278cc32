#include "terra/core/dispatch.h"
#include "terra/core/execute.h"
#include "terra/core/float_env.h"

#include <stdexcept>
#include <string>

#include "terra/autograd/grad_mode.h"
#include "terra/autograd/node.h"
#include "terra/core/object_pool.h"
#include "terra/core/random.h"

namespace terra {
template <class Out>
void execute_eager_into(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                        const TensorMetas& meta, PhiloxKey rng, bool bump_version, Out& out) {
  KernelFloatEnv fe;  // denormals flushed in every mode, on every thread (core/float_env.h)
  out.clear();
  if (op.has(kView)) {
    in[0].impl()->data();  // a pending value must exist before a view of it can point into it
    out.push_back(op.view(in[0], attrs));
    return;
  }
  if (op.has(kInplace)) {
    const uint32_t n = inplace_targets(op, attrs);
    out.assign(in.begin(), in.begin() + n);
    op.kernel(KernelArgs{in, out, attrs, rng});
    if (bump_version)
      for (uint32_t k = 0; k < n; ++k) in[k].impl()->storage->version.fetch_add(1);
    return;
  }
  out.reserve(meta.size());
  for (auto& m : meta) out.push_back(empty_checked(m.shape, m.dtype, op.name));
  op.kernel(KernelArgs{in, out, attrs, rng});
}

template void execute_eager_into(const OpDef&, std::span<const Tensor>, const Attrs&, const TensorMetas&, PhiloxKey,
                                 bool, std::vector<Tensor>&);
template void execute_eager_into(const OpDef&, std::span<const Tensor>, const Attrs&, const TensorMetas&, PhiloxKey,
                                 bool, TensorList&);

TensorList execute_eager(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                         const TensorMetas& meta, PhiloxKey rng, bool bump_version) {
  TensorList out;
  execute_eager_into(op, in, attrs, meta, rng, bump_version, out);
  return out;
}

// True when `t`'s host bytes are its current value: host-fed or computed eagerly, not a graph
// placeholder and not the target of an in-place write a graph mode still owes.
static bool value_on_host(const Tensor& t) {
  const TensorImpl* i = t.impl();
  return i->has_data() && !i->storage->deferred_write.load(std::memory_order_relaxed);
}

static void check_values(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs) {
  for (size_t k = 0; k < in.size() && k < 32; ++k)
    if ((op.check_inputs >> k & 1u) && !value_on_host(in[k])) return;  // the kernel raises it later
  op.check_values(in, attrs);
}

static autograd::Edge edge_of(const Tensor& t) {
  TensorImpl* i = t.impl();
  if (i->grad_fn) return {i->grad_fn, i->output_nr, nullptr};
  if (i->requires_grad) return {nullptr, 0, t.impl_ptr()};
  return {};
}

// dispatch's work; the outputs in a pooled list (dispatch1 takes one out of it, no malloc).
static TensorList dispatch_list(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs) {
  for (size_t k = 0; k < in.size(); ++k)
    if (!in[k].defined())
      throw std::invalid_argument(std::string("[") + op.name + "] input " + std::to_string(k) + " is undefined");
  Executor* ex = current_executor();
  // A call the executor knows (the co-executing host on its predicted path, inputs shaped as
  // before): inference is a pure function of the inputs' shapes, dtypes and the attributes, and its
  // checks passed for these, so the same metas stand.
  const TensorMetas* known = ex ? ex->known_outputs(op, in, attrs) : nullptr;
  const TensorMetas inferred = known ? TensorMetas() : op.infer(in, attrs);
  const TensorMetas& meta = known ? *known : inferred;
  // Every output shape, in every mode, before anything is recorded: sizes that overflow never run.
  if (known) {
    // (checked when these metas were first inferred)
  } else if (!op.has(kView) && !op.has(kInplace)) {  // outputs to allocate: an impossible size fails here
    for (const auto& m : meta) check_output(op.name, m.shape, m.dtype);
  } else {
    for (const auto& m : meta) check_shape(op.name, m.shape, itemsize(m.dtype));
  }

  PhiloxKey rng;
  if (op.has(kRandom)) {
    uint64_t n = 0;
    for (const auto& m : meta) n += uint64_t(numel_of(m.shape));
    rng = reserve_random(n);
  }

  std::shared_ptr<autograd::Node> node;
  if (!op.grad && op.has(kInplace) && grad_enabled()) {
    // Overwriting a value autograd may need, with no gradient to record: refuse, never be wrong.
    for (auto& t : in)
      if (t.impl()->requires_grad)
        throw std::invalid_argument(std::string("[") + op.name + "] in-place op on a tensor of shape " +
                                    shape_str(t.shape()) +
                                    " that requires grad has no gradient; compute it out of place or under NoGradGuard");
  }
  if (op.grad && grad_enabled()) {
    bool any = false;
    for (auto& t : in) any |= t.impl()->requires_grad;
    if (any) {
      if (op.has(kInplace)) {
        TensorImpl* self = in[0].impl();
        if (self->requires_grad && !self->grad_fn)
          throw std::invalid_argument(std::string("[") + op.name + "] a leaf tensor of shape " +
                                      shape_str(self->shape) +
                                      " that requires grad cannot be modified in place (use NoGradGuard)");
        if (self->base && (self->base->requires_grad || self->requires_grad))
          throw std::invalid_argument(std::string("[") + op.name +
                                      "] in-place modification of a view of a tensor that requires grad is not "
                                      "supported; shape " + shape_str(self->shape));
      }
      node = make_pooled<autograd::Node>();
      node->op = &op;
      node->attrs = attrs;
      node->rng = rng;
      node->next.reserve(in.size());
      node->in_meta.reserve(in.size());
      for (auto& t : in) {
        node->next.push_back(is_floating(t.dtype()) ? edge_of(t) : autograd::Edge{});
        node->in_meta.push_back({t.shape(), t.dtype()});
      }
      if (op.has(kSaveInputs))
        for (size_t k = 0; k < in.size(); ++k)
          node->saved_in.push_back((op.unsaved_in >> k) & 1u ? autograd::SavedTensor{} : autograd::SavedTensor::save(in[k]));
    }
  }

  // Value errors the kernel would raise, raised here where the values are known: at the call site
  // in every mode, after exactly the checks that precede the kernel in eager.
  if (op.check_values) check_values(op, in, attrs);
  TensorList out = ex ? ex->run(op, in, attrs, meta, rng) : execute_eager(op, in, attrs, meta, rng);
  // (An in-place write a graph mode defers marks its storage deferred_write: placeholder_outputs.)

  if (node) {
    node->out_meta.reserve(out.size());
    for (auto& t : out) node->out_meta.push_back({t.shape(), t.dtype()});
    if (op.has(kSaveOutputs))
      for (size_t k = 0; k < out.size(); ++k)
        node->saved_out.push_back((op.unsaved_out >> k) & 1u ? autograd::SavedTensor{} : autograd::SavedTensor::save(out[k]));
    for (size_t k = 0; k < out.size(); ++k) {
      TensorImpl* o = out[k].impl();
      if (!is_floating(o->dtype)) continue;
      o->requires_grad = true;
      o->grad_fn = node;
      o->output_nr = uint32_t(k);
    }
  }
  return out;
}

std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs) {
  TensorList out = dispatch_list(op, in, attrs);
  return std::vector<Tensor>(std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()));
}

Tensor dispatch1(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs) {
  return std::move(dispatch_list(op, in, attrs)[0]);
}

void dispatch_effect(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs) { dispatch_list(op, in, attrs); }

void fetch(const Tensor& t) {
  if (!t.defined()) throw std::invalid_argument("[fetch] reading the value of an undefined tensor");
  if (Executor* ex = current_executor()) ex->on_fetch(t);
  t.impl()->data();
}

Tensor mark_external(Tensor t) {
  if (Executor* ex = current_executor()) ex->on_external(t);
  return t;
}

}  // namespace terra
