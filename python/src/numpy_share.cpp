// NumPy without copies: terra.from_numpy(a) wraps a's buffer in a tensor, Tensor.numpy() returns
// an array viewing the tensor's storage. When each shares and when it copies is documented in
// README.md ("NumPy and terra share memory"); tests/python/test_numpy_share.py checks it.
#include <pybind11/numpy.h>

#include <cstring>
#include <mutex>

#include "binding.h"

namespace terra::python {
namespace {

// Dropping the last reference to a NumPy array needs the GIL. The last owner of a storage that wraps
// one may be the GraphRunner thread (a fed value freed after its step), which must not take the GIL:
// a host thread holding it may be waiting for that runner. Such releases are queued and done by the
// interpreter's main thread (Py_AddPendingCall) or at the next from_numpy.
std::mutex g_release_mu;
std::vector<PyObject*> g_release_queue;
bool g_release_scheduled = false;

int drain_releases(void*) {
  std::vector<PyObject*> q;
  {
    std::lock_guard<std::mutex> g(g_release_mu);
    q.swap(g_release_queue);
    g_release_scheduled = false;
  }
  for (PyObject* o : q) Py_DECREF(o);
  return 0;
}

void release_array(PyObject* o) {
  if (!Py_IsInitialized()) return;  // the interpreter is gone (process exit): nothing to release into
  if (PyGILState_Check()) {
    Py_DECREF(o);
    return;
  }
  std::lock_guard<std::mutex> g(g_release_mu);
  g_release_queue.push_back(o);
  // Py_AddPendingCall may be called without the GIL; when its queue is full the next release (or
  // from_numpy) tries again.
  if (!g_release_scheduled) g_release_scheduled = Py_AddPendingCall(&drain_releases, nullptr) == 0;
}

// The terra dtype stored with exactly this NumPy dtype's bytes, if any.
bool shared_dtype(const py::dtype& d, DType* out) {
  if (d.equal(py::dtype::of<float>())) *out = DType::Float32;
  else if (d.equal(py::dtype::of<double>())) *out = DType::Float64;
  else if (d.equal(py::dtype::of<int64_t>())) *out = DType::Int64;
  else if (d.equal(py::dtype::of<bool>())) *out = DType::Bool;
  else return false;
  return true;
}

// A tensor whose storage is `a`'s buffer (kept alive by the storage), or an undefined tensor when the
// array cannot be shared safely: another dtype, not C-contiguous, misaligned, byte-swapped or
// read-only (terra's in-place ops would write into it).
Tensor share_array(const py::array& a) {
  DType dt;
  const int flags = a.flags();
  if (!shared_dtype(a.dtype(), &dt) || !(flags & py::array::c_style) || !(flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) ||
      !a.writeable() || a.dtype().byteorder() == '>')
    return Tensor();
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dt;
  impl->shape.assign(a.shape(), a.shape() + a.ndim());
  impl->strides.assign(impl->shape.size(), 1);
  for (size_t d = impl->shape.size(); d-- > 1;) impl->strides[d - 1] = impl->strides[d] * impl->shape[d];
  impl->numel = 1;
  for (int64_t s : impl->shape) impl->numel *= s;
  if (impl->numel == 0) {  // nothing to share: an ordinary empty tensor
    impl->storage = std::make_shared<Storage>(0);
    return Tensor(impl);
  }
  PyObject* owner = a.inc_ref().ptr();
  auto* s = new Storage();
  s->data = const_cast<void*>(a.data());
  s->nbytes = size_t(a.nbytes());
  s->foreign = true;  // NumPy writes it without telling terra: graph modes copy it where they defer a read
  impl->storage = std::shared_ptr<Storage>(s, [owner](Storage* st) {
    st->data = nullptr;  // not terra's block: ~Storage must not return it to the allocator
    st->nbytes = 0;
    delete st;
    release_array(owner);
  });
  return Tensor(impl);
}

// Copies for what cannot be viewed: non-contiguous tensors and tensors that require grad.
template <class T>
py::array copy_out(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array_t<T> a(shape);
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<bool> v = without_gil([&] { return t.to_vector<bool>(); });
    bool* out = a.mutable_data();
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i];
  } else {
    std::vector<T> v = without_gil([&] { return t.to_vector<T>(); });
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
  }
  return a;
}

template <class T>
py::array to_array(const Tensor& t, bool writable) {
  if (!t.is_contiguous() || t.requires_grad() || t.numel() == 0) return copy_out<T>(t);
  // A writable view lets NumPy write the storage behind terra's back, as from_numpy does. Marked
  // before the fetch too: co-execution then waits for every op called before this one (they may
  // read the bytes NumPy is about to write), not only for the value's own op.
  if (writable) {
    auto g = lock_if_awaiting(*t.impl());  // another thread's first read may be installing the value
    t.impl()->storage->foreign = true;
  }
  const T* p = without_gil([&] { return t.data_ptr<T>(); });  // the fetch point (waits for the value)
  if (writable) t.impl()->storage->foreign = true;  // the storage the value has now (the runner's)
  // The array keeps the storage alive, not the tensor: the tensor may die first.
  auto* keep = new std::shared_ptr<Storage>(t.impl()->storage);
  py::capsule base(keep, [](void* k) { delete static_cast<std::shared_ptr<Storage>*>(k); });
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<py::ssize_t> strides(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) strides[d] = py::ssize_t(t.strides()[d]) * py::ssize_t(sizeof(T));
  py::array a = py::array_t<T>(shape, strides, p, base);
  if (!writable) py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

}  // namespace

py::object numpy_of(const Tensor& t, bool writable) {
  switch (t.dtype()) {
    case DType::Float32: return to_array<float>(t, writable);
    case DType::Float64: return to_array<double>(t, writable);
    case DType::Int64: return to_array<int64_t>(t, writable);
    case DType::Bool: return to_array<bool>(t, writable);
  }
  throw std::runtime_error("[numpy] unknown dtype");
}

void bind_numpy_share(py::module_& m) {
  m.def("_share_numpy", [](py::array a) -> py::object {
    drain_releases(nullptr);
    Tensor t = share_array(a);
    return t.defined() ? py::cast(t) : py::none();
  }, py::arg("array"), "A tensor sharing the array's memory, or None when it cannot share (then from_numpy copies).");
  tensor_class(m).def("numpy", [](const Tensor& t) { return numpy_of(t, true); },
                      "The value as a NumPy array sharing the tensor's memory (a copy when the tensor is not "
                      "contiguous or requires grad). A fetch point.");
  // For terra's own reads (printing): a read-only view, so the storage is not marked foreign.
  tensor_class(m).def("_numpy_read", [](const Tensor& t) { return numpy_of(t, false); });
}

}  // namespace terra::python
