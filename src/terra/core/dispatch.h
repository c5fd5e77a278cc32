// The dispatcher: every op call goes through dispatch(). It validates and infers shapes (same
// error in every mode), hands the call to the current Executor (eager by default; tracing,
// skeleton and lazy executors plug in here), and records autograd history.
#pragma once
#include <initializer_list>
#include <span>
#include <vector>

#include "terra/core/executor.h"
#include "terra/core/op.h"

namespace terra {

// Inputs as a span (a vector converts): an op call builds no input vector, so it reaches no
// malloc for one; `dispatch1(op, {a, b})` takes the braced list itself.
std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs = {});
Tensor dispatch1(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs = {});
inline std::vector<Tensor> dispatch(const OpDef& op, std::initializer_list<Tensor> in, const Attrs& attrs = {}) {
  return dispatch(op, std::span<const Tensor>(in.begin(), in.size()), attrs);
}
inline Tensor dispatch1(const OpDef& op, std::initializer_list<Tensor> in, const Attrs& attrs = {}) {
  return dispatch1(op, std::span<const Tensor>(in.begin(), in.size()), attrs);
}
// The same for a call whose outputs the caller does not use (in-place ops, optimizer updates):
// they stay in the pooled list and are dropped there, with no vector malloc'd for them.
void dispatch_effect(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs = {});
inline void dispatch_effect(const OpDef& op, std::initializer_list<Tensor> in, const Attrs& attrs = {}) {
  dispatch_effect(op, std::span<const Tensor>(in.begin(), in.size()), attrs);
}

// Runs the kernel (or view) now on real inputs. Eager mode, tracing and the GraphRunner use it.
// Version counters are host-side semantics: graph executors replaying a call pass bump=false.
TensorList execute_eager(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                         const TensorMetas& meta, PhiloxKey rng, bool bump_version = true);

// Fetch-point hook used by Tensor's readers: tells the executor, then materializes.
void fetch(const Tensor& t);
// Feed-point hook used by the factories of host data.
Tensor mark_external(Tensor t);

}  // namespace terra
