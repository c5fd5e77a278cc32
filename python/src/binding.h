// Shared declarations of the Python binding: one bind_* function per file (one op group each).
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include <terra/terra.h>

namespace py = pybind11;

// terra::Shape converts to and from Python exactly as std::vector<int64_t> does: any sequence
// but str/bytes in (numpy arrays included), a list out.
namespace pybind11::detail {
template <>
struct type_caster<terra::Shape> : list_caster<terra::Shape, int64_t> {};
}  // namespace pybind11::detail

namespace terra::python {

// A Python int (or __index__ object) as int64: one outside the int64 range raises OverflowError
// "[op] <arg> ... is out of the int64 range" (pybind's own cast only says "Unable to cast").
int64_t int_arg(const py::handle& h, const char* op, const char* arg);

// An int parameter kept as the Python object until the binding, which knows the op, converts it
// with get(op, arg). Accepts what pybind's int64 caster accepts (ints, __index__; not floats).
struct Int {
  py::object obj;
  int64_t get(const char* op, const char* arg) const { return int_arg(obj, op, arg); }
};

// Shapes from Python: f(2, 3), f((2, 3)) and f([2, 3]) all mean [2, 3].
Shape shape_from_args(const py::args& args, const char* op);
Shape shape_from_object(const py::handle& obj, const char* op);
// dims=None -> {} (all dims), an int -> {d}, a sequence -> its ints.
std::vector<int64_t> dims_from_object(const py::handle& obj, const char* op = "dims");
// "float32"/terra.float32/... -> DType.
DType dtype_from_object(const py::handle& obj);

// The names this binding exposes as ops (module-level functions); test_conformance checks that
// each has a case. Each bind_* function adds what it binds.
void expose(py::module_& m, const char* name);

// Location of the current op call inside a step: (code object id, instruction offset) pairs of
// the Python frames from the innermost up to and including the frame that entered the step
// (all frames when no step frame is set). Needs the GIL. See location.cpp.
std::vector<uint64_t> python_location();
void set_step_frame(PyObject* frame);  // new reference taken; nullptr clears

// Fetch points wait for the graph (co-execution: the runner; lazy: the block) without the GIL, so
// other Python threads run meanwhile. An op the wait itself runs (a fallback replaying the step)
// takes the GIL back for its location (location.cpp).
template <class F>
auto without_gil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

// Tensor.numpy(): a view of the tensor's storage where that is safe, else a copy (numpy_share.cpp).
// A writable view marks the storage foreign (NumPy may write it; graph modes then copy it where
// they defer a read); terra's own reads (tolist, printing) take a read-only one.
py::object numpy_of(const Tensor& t, bool writable);

void bind_errors(py::module_& m);
void bind_tensor(py::module_& m);
// Points terra.Tensor's + - * / @ and unary - slots at direct calls (number_slots.cpp).
void install_number_slots(py::handle tensor_type);
void bind_numpy_share(py::module_& m);
void bind_creation(py::module_& m);
void bind_core_ops(py::module_& m);
void bind_elementwise(py::module_& m);
void bind_nn_ops(py::module_& m);
void bind_softmax_loss(py::module_& m);
void bind_indexing_random(py::module_& m);
void bind_nn(py::module_& m);
void bind_optim(py::module_& m);
void bind_engine(py::module_& m);
void bind_location(py::module_& m);

}  // namespace terra::python

namespace pybind11::detail {
// terra.Tensor arguments and results without pybind's per-call type lookup (a hash of the type's
// name on every conversion): the type_info is looked up once; an exact terra.Tensor argument is
// read straight from its instance. Anything else (a Python subclass such as Parameter, None, other
// objects) takes pybind's generic path, so conversions and error messages are unchanged. Built on
// type_caster_generic with type_caster_base's interface: type_caster_base's constructor looks the
// type up again for every argument converted.
template <>
class type_caster<terra::Tensor> : public type_caster_generic {
  using itype = terra::Tensor;

 public:
  // terra.Tensor's record: null until it is registered, then cached (tensor.cpp's init_instance
  // reads it too).
  static const type_info* tinfo() {
    static const type_info* ti = nullptr;
    if (!ti) ti = get_type_info(typeid(itype));
    return ti;
  }

 private:
  static type_caster_generic generic() {
    const type_info* ti = tinfo();
    return ti ? type_caster_generic(ti) : type_caster_generic(typeid(itype));
  }
  static void* copy_of(const void* p) { return new itype(*static_cast<const itype*>(p)); }
  static void* moved_from(const void* p) { return new itype(std::move(*const_cast<itype*>(static_cast<const itype*>(p)))); }

 public:
  static constexpr auto name = const_name<itype>();
  type_caster() : type_caster_generic(generic()) {}

  bool load(handle src, bool convert) {
    const type_info* ti = tinfo();
    if (ti && src && Py_TYPE(src.ptr()) == ti->type) {
      auto* inst = reinterpret_cast<instance*>(src.ptr());
      if (inst->simple_layout && inst->simple_value_holder[0]) {
        value = inst->simple_value_holder[0];
        return true;
      }
    }
    return type_caster_generic::load(src, convert);
  }
  static handle cast(const itype& src, return_value_policy policy, handle parent) {
    if (!tinfo()) return type_caster_base<itype>::cast(src, policy, parent);
    if (policy == return_value_policy::automatic || policy == return_value_policy::automatic_reference)
      policy = return_value_policy::copy;
    return type_caster_generic::cast(&src, policy, parent, tinfo(), &copy_of, &moved_from);
  }
  static handle cast(itype&& src, return_value_policy policy, handle parent) {
    if (!tinfo()) return type_caster_base<itype>::cast(std::move(src), policy, parent);
    return type_caster_generic::cast(&src, return_value_policy::move, parent, tinfo(), &copy_of, &moved_from);
  }
  static handle cast(const itype* src, return_value_policy policy, handle parent) {
    return type_caster_base<itype>::cast(src, policy, parent);
  }

  template <typename T>
  using cast_op_type = detail::cast_op_type<T>;
  operator itype*() { return static_cast<itype*>(value); }  // NOLINT(google-explicit-constructor)
  operator itype&() {                                       // NOLINT(google-explicit-constructor)
    if (!value) throw reference_cast_error();
    return *static_cast<itype*>(value);
  }
};
template <>
struct type_caster<terra::python::Int> {
  PYBIND11_TYPE_CASTER(terra::python::Int, const_name("int"));
  bool load(handle src, bool convert) {
    if (!src || PyFloat_Check(src.ptr())) return false;
    if (!PyLong_Check(src.ptr()) && !(convert && PyIndex_Check(src.ptr()))) return false;
    value.obj = reinterpret_borrow<object>(src);
    return true;
  }
  static handle cast(const terra::python::Int& v, return_value_policy, handle) { return v.obj.inc_ref(); }
};
}  // namespace pybind11::detail

// A module function terra.<name>(input, ...) and the method Tensor.<name>(...), exposed as an op.
// Extra annotations name the arguments after input.
#define TERRA_PY_BOTH(m, cls, name, fn, ...)                                 \
  do {                                                                       \
    (m).def(name, fn, py::arg("input") __VA_OPT__(, ) __VA_ARGS__);          \
    (cls).def(name, fn __VA_OPT__(, ) __VA_ARGS__);                          \
    ::terra::python::expose(m, name);                                        \
  } while (0)

namespace terra::python {
inline py::class_<Tensor> tensor_class(py::module_& m) {
  return py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
}
}  // namespace terra::python

namespace terra::python {
// An int or a pair of ints (torch's _pair).
inline std::array<int64_t, 2> int2_from_object(const py::handle& h, const char* op) {
  if (py::isinstance<py::int_>(h)) {
    int64_t v = int_arg(h, op, "argument");
    return {v, v};
  }
  auto v = dims_from_object(h, op);
  if (v.size() != 2)
    throw std::invalid_argument(std::string("[") + op + "] expected an int or a pair of ints, got " +
                                std::string(py::repr(h)));
  return {v[0], v[1]};
}
// None -> undefined tensor.
inline Tensor opt_tensor(const py::object& o) { return o.is_none() ? Tensor() : o.cast<Tensor>(); }
}  // namespace terra::python
