// Lower-level entry points for executors that run many ops on one thread (the GraphRunner): kept
// out of tensor.h/dispatch.h so the user-facing headers stay as they are.
#pragma once
#include <span>
#include <vector>

#include "terra/core/op.h"
#include "terra/core/tensor.h"

namespace terra {

// execute_eager (dispatch.h) into `out`, cleared first: its capacity is reused, so a caller that
// keeps one vector allocates nothing per op for it. Out is a std::vector<Tensor> (the runner's)
// or a TensorList (dispatch.cpp instantiates both).
template <class Out>
void execute_eager_into(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                        const TensorMetas& meta, PhiloxKey rng, bool bump_version, Out& out);

// empty() for a shape that already passed check_output: dispatch checks every output of every
// op before any mode runs it, so the executors allocate without checking each shape again.
Tensor empty_checked(const Shape& shape, DType dtype, const char* op);

// The calling thread's tensors take ids from private blocks (see tensor.cpp): for a thread whose
// tensors the host never sees as objects, so their ids need not be ordered with next_tensor_id().
void take_tensor_ids_in_blocks();

}  // namespace terra
