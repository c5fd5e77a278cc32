#include "terra/core/tensor.h"

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#include "terra/autograd/node.h"
#include "terra/core/dispatch.h"
#include "terra/core/execute.h"
#include "terra/core/object_pool.h"

namespace terra {
namespace {
std::atomic<uint64_t> g_next_id{1};

[[noreturn]] void throw_undefined(const char* what) {
  throw std::invalid_argument(std::string("[") + what + "] called on an undefined tensor");
}

const TensorImpl& need(const TensorImpl* i, const char* what) {
  if (!i) throw_undefined(what);
  return *i;
}
}  // namespace

// A thread that makes a tensor on every op beside the host (the GraphRunner) takes its ids in
// blocks: one counter bumped by both cores on every op moved its cache line between them each time.
// Such ids stay unique but are not ordered with the host's next_tensor_id(); that thread's tensors
// never reach the host's step-boundary test (it hands values over through storage, not impls).
namespace {
constexpr uint64_t kIdBlock = 4096;
thread_local uint64_t t_id_next = 0, t_id_end = 0;
thread_local bool t_id_blocks = false;

uint64_t new_tensor_id() {
  if (!t_id_blocks) return g_next_id.fetch_add(1, std::memory_order_relaxed);
  if (t_id_next == t_id_end) {
    t_id_next = g_next_id.fetch_add(kIdBlock, std::memory_order_relaxed);
    t_id_end = t_id_next + kIdBlock;
  }
  return t_id_next++;
}
}  // namespace

TensorImpl::TensorImpl() : id(new_tensor_id()) {}
// tensor.h's rule: 48 bytes of host fields before the ones the runner reads on every op.
static_assert(offsetof(TensorImpl, shape) >= 48, "TensorImpl: keep the host's fields first");
uint64_t next_tensor_id() { return g_next_id.load(std::memory_order_relaxed); }
void take_tensor_ids_in_blocks() { t_id_blocks = true; }

bool TensorImpl::is_contiguous() const {
  int64_t expect = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

// Locks for the first read of a pending tensor, by address: held only while a value that
// exists is installed, never while waiting for one (the waiter could be holding up a runner that
// needs the thread blocked on the lock).
static std::mutex& install_lock(const TensorImpl* t) {
  static std::mutex locks[64];
  return locks[(reinterpret_cast<uintptr_t>(t) >> 6) % 64];
}

std::unique_lock<std::mutex> lock_if_awaiting(const TensorImpl& t) {
  if (!t.awaiting.load(std::memory_order_acquire)) return {};
  return std::unique_lock<std::mutex>(install_lock(&t));
}

void* TensorImpl::data_slow() {
  if (!has_data()) {
    std::shared_ptr<PendingValue> p;
    // Another thread's install resets `pending` under the lock.
    if (auto g = lock_if_awaiting(*this); g.owns_lock() && awaiting.load(std::memory_order_relaxed)) p = pending;
    if (p) {
      p->wait(*this);
      std::lock_guard<std::mutex> g(install_lock(this));
      if (awaiting.load(std::memory_order_relaxed) && pending == p) p->materialize(*this);
    }
    if (!has_data() && numel != 0)
      throw std::runtime_error("[tensor] value of shape " + shape_str(shape) + " is not available");
  }
  if (!storage || !storage->data) return nullptr;
  return static_cast<char*>(storage->data) + offset * int64_t(itemsize(dtype));
}

static std::string cannot_allocate(const char* op, size_t nbytes, const Shape& shape, DType dtype) {
  return std::string("[") + op + "] cannot allocate " + std::to_string(nbytes) + " bytes for shape " +
         shape_str(shape) + " (" + dtype_name(dtype) + ")";
}

static const size_t g_machine_bytes = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGESIZE));

void check_allocatable(const char* op, const Shape& shape, DType dtype) {
  size_t nbytes = size_t(numel_of(op, shape)) * itemsize(dtype);  // check_shape ran: fits
  if (g_machine_bytes > 0 && nbytes > g_machine_bytes)
    throw OutOfMemory(cannot_allocate(op, nbytes, shape, dtype) + ": more than this machine's " +
                      std::to_string(g_machine_bytes) + " bytes of memory");
}

int64_t check_output(const char* op, const Shape& shape, DType dtype) {
  // One pass over the sizes for what check_shape and check_allocatable test (every output of
  // every op, in every mode, and again on the runner); they run only to raise the exact error.
  const int64_t isz = int64_t(itemsize(dtype));
  int64_t bound = 1, n = 1, bytes = 0;
  bool ok = true;
  for (int64_t d : shape) {
    ok = ok && d >= 0 && !__builtin_mul_overflow(bound, d > 0 ? d : 1, &bound);
    if (ok) n *= d;  // |n| <= bound
  }
  ok = ok && !__builtin_mul_overflow(n, isz, &bytes) && (g_machine_bytes == 0 || size_t(bytes) <= g_machine_bytes);
  if (!ok) {
    check_shape(op, shape, size_t(isz));
    check_allocatable(op, shape, dtype);
  }
  return n;
}

Tensor empty(const Shape& shape, DType dtype, const char* op) {
  check_output(op, shape, dtype);  // throws on a bad shape
  return empty_checked(shape, dtype, op);
}

Tensor empty_checked(const Shape& shape, DType dtype, const char* op) {
  auto t = make_pooled<TensorImpl>();
  t->shape = shape;
  t->numel = contiguous_layout(shape, t->strides);
  t->dtype = dtype;
  size_t nbytes = size_t(t->numel) * itemsize(dtype);  // check_shape: fits
  try {
    t->storage = make_pooled<Storage>(nbytes);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(cannot_allocate(op, nbytes, shape, dtype));
  }
  return Tensor(std::move(t));
}

std::shared_ptr<TensorImpl> host_snapshot(const TensorImpl& t) {
  // Only the span of elements `t` reaches: a batch sliced from a large NumPy array copies the batch.
  int64_t lo = t.offset, hi = t.offset;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    int64_t reach = (t.shape[d] - 1) * t.strides[d];  // numel > 0 here: every size is at least 1
    (reach < 0 ? lo : hi) += reach;
  }
  const size_t isz = itemsize(t.dtype), nbytes = size_t(hi - lo + 1) * isz;
  auto c = make_pooled<TensorImpl>();
  c->shape = t.shape;
  c->strides = t.strides;
  c->offset = t.offset - lo;
  c->numel = t.numel;
  c->dtype = t.dtype;
  try {
    c->storage = make_pooled<Storage>(nbytes);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(cannot_allocate("snapshot", nbytes, t.shape, t.dtype));
  }
  std::memcpy(c->storage->data, static_cast<const char*>(t.storage->data) + lo * int64_t(isz), nbytes);
  return c;
}

const TensorImpl& Tensor::undefined(const char* what) { throw_undefined(what); }
const Shape& Tensor::strides() const { return need(impl_.get(), "strides").strides; }
int64_t Tensor::numel() const { return need(impl_.get(), "numel").numel; }
bool Tensor::is_contiguous() const { return need(impl_.get(), "is_contiguous").is_contiguous(); }
int64_t Tensor::size(int64_t d) const { return shape()[size_t(wrap_dim("size", d, dim()))]; }

template <class T>
T Tensor::item() const {
  need(impl_.get(), "item");
  if (numel() != 1)
    throw std::invalid_argument("[item] needs a tensor with one element, got shape " + shape_str(shape()));
  fetch(*this);
  T v{};
  visit_dtype(dtype(), [&](auto z) {
    using S = decltype(z);
    v = static_cast<T>(*impl_->data_as<S>());
  });
  return v;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  need(impl_.get(), "to_vector");
  fetch(*this);
  std::vector<T> out(static_cast<size_t>(numel()));
  if (out.empty()) return out;
  visit_dtype(dtype(), [&](auto z) {
    using S = decltype(z);
    const S* base = static_cast<const S*>(impl_->storage->data);
    const Shape& sh = impl_->shape;
    const Shape& st = impl_->strides;
    int64_t n = numel(), rank = dim();
    std::vector<int64_t> idx(size_t(rank), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = impl_->offset;
      for (int64_t d = 0; d < rank; ++d) off += idx[size_t(d)] * st[size_t(d)];
      out[size_t(i)] = static_cast<T>(base[off]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[size_t(d)] < sh[size_t(d)]) break;
        idx[size_t(d)] = 0;
      }
    }
  });
  return out;
}

template <class T>
const T* Tensor::data_ptr() const {
  need(impl_.get(), "data_ptr");
  if (dtype_of<T>::value != dtype())
    throw std::invalid_argument(std::string("[data_ptr] requested ") + dtype_name(dtype_of<T>::value) +
                                " from a tensor of dtype " + dtype_name(dtype()));
  if (!is_contiguous())
    throw std::invalid_argument("[data_ptr] tensor of shape " + shape_str(shape()) + " is not contiguous");
  fetch(*this);
  return impl_->data_as<T>();
}

#define TERRA_INSTANTIATE(T)                             \
  template T Tensor::item<T>() const;                    \
  template std::vector<T> Tensor::to_vector<T>() const;  \
  template const T* Tensor::data_ptr<T>() const;
TERRA_INSTANTIATE(float)
TERRA_INSTANTIATE(double)
TERRA_INSTANTIATE(int64_t)
TERRA_INSTANTIATE(bool)
#undef TERRA_INSTANTIATE
template int Tensor::item<int>() const;

Tensor Tensor::grad() const {
  const TensorImpl& i = need(impl_.get(), "grad");
  return i.grad ? Tensor(i.grad) : Tensor();
}
void Tensor::set_grad(const Tensor& g) const {
  need(impl_.get(), "set_grad");
  if (g.defined() && g.shape() != shape())
    throw std::invalid_argument("[set_grad] gradient of shape " + shape_str(g.shape()) +
                                " does not match tensor of shape " + shape_str(shape()));
  impl_->grad = g.impl_ptr();
}
bool Tensor::requires_grad() const { return need(impl_.get(), "requires_grad").requires_grad; }
Tensor& Tensor::requires_grad_(bool on) {
  need(impl_.get(), "requires_grad_");
  if (impl_->grad_fn && !on)
    throw std::invalid_argument("[requires_grad_] cannot turn off requires_grad of a non-leaf tensor; use detach()");
  if (on && !is_floating(impl_->dtype))
    throw std::invalid_argument(std::string("[requires_grad_] only floating tensors can require grad, got ") +
                                dtype_name(impl_->dtype));
  impl_->requires_grad = on;
  return *this;
}
bool Tensor::is_leaf() const { return !need(impl_.get(), "is_leaf").grad_fn; }
void Tensor::backward(const Tensor& gradient) const { autograd::run_backward(*this, gradient); }

Tensor Tensor::detach() const {
  const TensorImpl& s = need(impl_.get(), "detach");
  auto d = make_pooled<TensorImpl>();
  d->shape = s.shape;
  d->numel = s.numel;
  d->dtype = s.dtype;
  {
    // A pending value: read as one with its layout, not while another thread installs it.
    auto g = lock_if_awaiting(s);
    d->strides = s.strides;
    d->offset = s.offset;
    d->storage = s.storage;
    if (s.awaiting.load(std::memory_order_relaxed)) d->set_pending(s.pending);
  }
  d->base = s.base;  // not impl_: a saved output's alias must not own the output (a cycle through grad_fn)
  d->alias_of = impl_;
  d->trace_step = s.trace_step;  // same value: graph modes see the same producer
  d->trace_rec = s.trace_rec;
  d->trace_out = s.trace_out;
  return Tensor(std::move(d));
}

}  // namespace terra
