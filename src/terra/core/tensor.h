// Tensor: a cheap handle to a shared TensorImpl (shape, strides, dtype, storage, autograd state).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "terra/core/dtype.h"
#include "terra/core/shape.h"
#include "terra/core/storage.h"

namespace terra {

namespace autograd {
struct Node;
}
struct TensorImpl;

// Produces a tensor's value later: the lazy graph or the GraphRunner implements it.
// Two threads may read one tensor first at once: each waits for the value (wait, no lock held),
// then one installs it (materialize) under the tensor's lock (TensorImpl::data_slow).
struct PendingValue {
  virtual ~PendingValue() = default;
  // Blocks until the value exists (or raises its error); touches no field of `t`.
  virtual void wait(const TensorImpl& t) { (void)t; }
  // Called after wait(), under the tensor's lock: must leave t.storage holding data laid out as
  // t.shape/t.strides/t.offset describe (TensorImpl::adopt), then call t.installed().
  virtual void materialize(TensorImpl& t) = 0;
};

struct TensorImpl {
  // The host's fields first: a pooled TensorImpl follows its shared_ptr's reference counts, which
  // the host changes whenever it passes the tensor on (a parameter: on every op). These 48 bytes
  // keep the fields a GraphRunner reads on every op (shape, strides, storage) off the counts'
  // cache line, wherever the block starts (16-byte aligned): reading them while the host moved a
  // count took that line from the host's core on every op.
  //
  // Which op call of which traced/co-executed step produced the current value (0: none); graph
  // modes use it to find an input's producer without a side table.
  uint64_t trace_step = 0;
  uint32_t trace_rec = 0;
  uint32_t trace_out = 0;
  uint64_t id;  // process-unique, never reused
  // autograd
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  bool requires_grad = false;
  // Set while `pending` owes the value; cleared (release) once it is installed. Another thread may
  // install it meanwhile (data_slow): readers check this first, so they see storage, strides and
  // offset as written before the clear, and never read a storage being replaced.
  std::atomic<bool> awaiting{false};

  Shape shape;
  Shape strides;
  int64_t offset = 0;  // in elements
  int64_t numel = 0;
  DType dtype = DType::Float32;
  std::shared_ptr<Storage> storage;
  std::shared_ptr<PendingValue> pending;  // set while the value lives elsewhere (graph modes)

  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<TensorImpl> base;  // for views: the tensor whose storage this one views
  // For detach(): the tensor this one is an alias of (same storage and layout). Weak: a saved
  // output's alias must not own the output. Graph modes key an alias of a parameter as the parameter.
  std::weak_ptr<TensorImpl> alias_of;

  TensorImpl();

  bool is_contiguous() const;
  bool has_data() const { return !awaiting.load(std::memory_order_acquire) && storage && storage->data; }
  // Element 0's address; materializes a pending value first (no fetch-point bookkeeping).
  // Inline for the common case (kernels call it per operand, per op); the rest is data_slow().
  void* data() {
    if (has_data()) [[likely]]
      return static_cast<char*>(storage->data) + offset * int64_t(itemsize(dtype));
    return data_slow();
  }
  // A graph mode's placeholder: `p` owes the value (the tensor is not shared yet).
  void set_pending(std::shared_ptr<PendingValue> p) {
    pending = std::move(p);
    awaiting.store(true, std::memory_order_relaxed);
  }
  // materialize's step: this tensor names v's bytes. The layout is written only where it differs:
  // a graph mode's values have the layout its placeholders were given, and an op call that takes
  // this tensor as an input reads the layout without a lock while another thread's first read may
  // be installing the value. The storage, which this replaces, such calls read under
  // lock_if_awaiting.
  void adopt(const TensorImpl& v) {
    if (strides != v.strides) strides = v.strides;
    if (offset != v.offset) offset = v.offset;
    storage = v.storage;
  }
  // materialize's last step, the layout and storage in place: readers take the value from here.
  void installed() {
    awaiting.store(false, std::memory_order_release);
    pending.reset();  // may destroy the caller's pending value: nothing after this in materialize
  }
  template <class T>
  T* data_as() { return static_cast<T*>(data()); }

 private:
  void* data_slow();
};

// For code that reads a tensor's `storage` or `pending` without being its first reader (an op
// call's inputs): another thread's first read may be replacing both (data_slow, under the tensor's
// install lock). Holds that lock while the tensor still awaits its value; empty otherwise (an
// installed value's fields no longer change).
std::unique_lock<std::mutex> lock_if_awaiting(const TensorImpl& t);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  // Inline: every op asks its inputs' shape and dtype several times, in every mode.
  const Shape& shape() const { return impl_ ? impl_->shape : undefined("shape").shape; }
  const Shape& strides() const;
  int64_t dim() const { return int64_t(shape().size()); }
  int64_t size(int64_t d) const;
  int64_t numel() const;
  DType dtype() const { return impl_ ? impl_->dtype : undefined("dtype").dtype; }
  bool is_contiguous() const;

  // Fetch points: the host reads the value.
  template <class T> T item() const;
  template <class T> std::vector<T> to_vector() const;
  template <class T> const T* data_ptr() const;  // contiguous tensors only

  // autograd
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const;
  void backward(const Tensor& gradient = {}) const;
  Tensor detach() const;  // shares storage, no history

  // views and shape
  Tensor reshape(Shape s) const;
  Tensor view(Shape s) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor permute(std::vector<int64_t> dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(Shape s) const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType d) const;

  Tensor sum() const;
  Tensor sum(std::vector<int64_t> dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(std::vector<int64_t> dims, bool keepdim = false) const;

  // in place (bump the version counter; a view writes through to its base)
  const Tensor& add_(const Tensor& other, double alpha = 1.0) const;
  const Tensor& add_(double v) const;
  const Tensor& sub_(const Tensor& other) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(double v) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& zero_() const;
  const Tensor& fill_(double v) const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  [[noreturn]] static const TensorImpl& undefined(const char* what);  // throws "[what] called on an undefined tensor"
  std::shared_ptr<TensorImpl> impl_;
};

// The id the next TensorImpl will get (ids only grow): tensors with a smaller id existed before.
uint64_t next_tensor_id();

// Raises OutOfMemory ("[op] cannot allocate N bytes for shape ...") when a tensor of this shape
// needs more bytes than the machine has: at the op call, in every mode, before anything runs.
void check_allocatable(const char* op, const Shape& shape, DType dtype);
// check_shape and check_allocatable for an output of `shape` in one pass: its element count.
int64_t check_output(const char* op, const Shape& shape, DType dtype);
// A fresh contiguous tensor with uninitialized storage (no op: internal and kernel use). Throws
// std::invalid_argument for a bad shape and OutOfMemory when the storage cannot be allocated,
// both naming `op` (the op whose output it is).
Tensor empty(const Shape& shape, DType dtype = DType::Float32, const char* op = "empty");

// True when a graph mode that takes `t` from outside its graph (a feed, a recorded host tensor)
// must copy its value at the call: the host may overwrite the bytes before the graph runs
// (Storage::foreign) and terra owes them no deferred write (whose order the graph keeps, so the
// bytes are not the value yet and a copy would be wrong).
inline bool needs_snapshot(const TensorImpl& t) {  // inline: the co-execution host asks per input
  return t.has_data() && t.storage->foreign.load(std::memory_order_relaxed) &&
         !t.storage->deferred_write.load(std::memory_order_relaxed);
}
// A private copy of the bytes `t` covers, laid out as in `t` (same shape, strides and dtype): the
// value eager would read at this call. Throws OutOfMemory when the copy cannot be allocated.
std::shared_ptr<TensorImpl> host_snapshot(const TensorImpl& t);

}  // namespace terra
