// terra.Tensor: properties, fetch points (item/numpy/tolist), autograd, views, indexing, operators.
#include <pybind11/numpy.h>
#include <pybind11/operators.h>

#include <terra/autograd/node.h>

#include "binding.h"

namespace terra::python {
namespace {

py::object item_of(const Tensor& t) {
  switch (t.dtype()) {
    case DType::Float32:
    case DType::Float64: return py::float_(without_gil([&] { return t.item<double>(); }));
    case DType::Int64: return py::int_(without_gil([&] { return t.item<int64_t>(); }));
    case DType::Bool: return py::bool_(without_gil([&] { return t.item<bool>(); }));
  }
  throw std::runtime_error("[item] unknown dtype");
}

template <class T>
Tensor from_buffer(py::handle obj, Shape shape) {
  auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(obj);
  if (!a) throw std::invalid_argument("[tensor] cannot convert the data to an array");
  const T* p = a.data();
  if constexpr (std::is_same_v<T, bool>) {
    return tensor_bool(std::vector<bool>(p, p + a.size()), std::move(shape));
  } else if constexpr (std::is_same_v<T, double>) {
    return tensor_f64(std::vector<double>(p, p + a.size()), std::move(shape));
  } else {
    return tensor(std::vector<T>(p, p + a.size()), std::move(shape));
  }
}

// A numpy array (any layout) -> a fresh tensor of `dtype` (a feed point).
Tensor from_numpy(py::array arr, DType dtype) {
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  switch (dtype) {
    case DType::Float32: return from_buffer<float>(arr, shape);
    case DType::Float64: return from_buffer<double>(arr, shape);
    case DType::Int64: return from_buffer<int64_t>(arr, shape);
    case DType::Bool: return from_buffer<bool>(arr, shape);
  }
  throw std::runtime_error("[tensor] unknown dtype");
}

py::tuple shape_tuple(const Tensor& t) {
  py::tuple s(t.shape().size());
  for (size_t i = 0; i < t.shape().size(); ++i) s[i] = py::int_(t.shape()[i]);
  return s;
}

// mul_/div_ have no gradient in terra (their gradient needs the overwritten value), and the
// dispatcher does not refuse them on tensors that require grad: the gradient would silently be
// wrong. Refuse here, loudly, until the core does.
void no_grad_inplace(const char* op, const Tensor& self, const Tensor* other = nullptr) {
  if (!grad_enabled()) return;
  if (self.requires_grad() || (other && other->requires_grad()))
    throw std::invalid_argument(std::string("[") + op + "] in-place " + op +
                                " on a tensor that requires grad has no gradient in terra; write x = x " +
                                (op[0] == 'm' ? "*" : "/") + " y, or use terra.no_grad()");
}

[[noreturn]] void index_error(const std::string& msg) { throw py::index_error(msg); }

// x[idx]: ints select, slices slice (positive steps), None unsqueezes, ... expands.
Tensor index_of(const Tensor& x, py::handle idx) {
  std::vector<py::handle> items;
  if (py::isinstance<py::tuple>(idx)) {
    for (py::handle h : py::reinterpret_borrow<py::tuple>(idx)) items.push_back(h);
  } else {
    items.push_back(idx);
  }
  int64_t consuming = 0;
  bool has_ellipsis = false;
  for (py::handle h : items) {
    if (h.is_none()) continue;
    if (h.ptr() == Py_Ellipsis) {
      if (has_ellipsis) index_error("[index] an index can only have a single ellipsis");
      has_ellipsis = true;
      continue;
    }
    ++consuming;
  }
  if (consuming > x.dim())
    index_error("[index] too many indices for a tensor of shape " + shape_str(x.shape()) + ": " +
                std::to_string(consuming) + " given");
  Tensor r = x;
  int64_t d = 0;
  for (py::handle h : items) {
    if (h.is_none()) {
      r = unsqueeze(r, d++);
    } else if (h.ptr() == Py_Ellipsis) {
      d += x.dim() - consuming;
    } else if (py::isinstance<py::slice>(h)) {
      size_t start, stop, step, len;
      if (!py::reinterpret_borrow<py::slice>(h).compute(size_t(r.shape()[size_t(d)]), &start, &stop, &step, &len))
        throw py::error_already_set();
      if (py::ssize_t(step) <= 0) throw std::invalid_argument("[index] slice step must be positive");
      int64_t s = int64_t(start), n = int64_t(len), st = int64_t(step);
      r = slice(r, d, n ? s : 0, n ? s + (n - 1) * st + 1 : 0, st);
      ++d;
    } else if (py::isinstance<py::int_>(h) || (py::hasattr(h, "__index__") && !py::isinstance<Tensor>(h))) {
      int64_t i = int_arg(h, "index", "index");
      int64_t size = r.shape()[size_t(d)];
      if (i < -size || i >= size)
        index_error("[index] index " + std::to_string(i) + " is out of bounds for dim " + std::to_string(d) +
                    " with size " + std::to_string(size) + " (indexing a tensor of shape " + shape_str(x.shape()) + ")");
      r = select(r, d, i < 0 ? i + size : i);
    } else {
      throw std::invalid_argument("[index] unsupported index of type " +
                                  std::string(py::str(h.get_type().attr("__name__"))) +
                                  " (ints, slices, None and ... are supported; use terra.index_select/gather "
                                  "for tensor indices)");
    }
  }
  return r;
}

// class_<Tensor>::init_instance without its type lookup (a hash of the type's name for every
// Tensor made on Python's side): the same steps with the record looked up once. Tensor's holder
// is class_'s default, std::unique_ptr<Tensor>, which is move-only and not always constructed.
// An instance that owns its Tensor is not entered in pybind11's map of wrapped C++ addresses
// (entering it and taking it out again cost ~250 instructions per result): only a cast of that
// very address could find it, and no binding casts a Tensor by pointer or reference — results
// are new handles moved or copied into their own holder. pybind11 deregisters an instance at its
// death only if it was registered. A non-owning wrapper (a reference cast) is registered as usual.
void init_tensor_instance(py::detail::instance* inst, const void* holder_ptr) {
  using Holder = std::unique_ptr<Tensor>;
  auto v_h = inst->get_value_and_holder(py::detail::make_caster<Tensor>::tinfo());
  if (!inst->owned && !v_h.instance_registered()) {
    py::detail::register_instance(inst, v_h.value_ptr(), v_h.type);
    v_h.set_instance_registered();
  }
  if (holder_ptr) {
    new (std::addressof(v_h.holder<Holder>())) Holder(std::move(*const_cast<Holder*>(static_cast<const Holder*>(holder_ptr))));
    v_h.set_holder_constructed();
  } else if (inst->owned) {
    new (std::addressof(v_h.holder<Holder>())) Holder(v_h.value_ptr<Tensor>());
    v_h.set_holder_constructed();
  }
}
static_assert(std::is_same_v<py::class_<Tensor>::holder_type, std::unique_ptr<Tensor>>);

}  // namespace

void bind_tensor(py::module_& m) {
  // module_local: pybind11 looks a type up in the module's own registry first, then in the
  // global one, hashing the type's name (std::type_index) each time; Tensor is cast on every
  // argument and result of every op call, and found in the first lookup this way. Another
  // pybind11 module can still take one as an argument, not return one (README, "Installing the
  // Python package").
  py::class_<Tensor> cls(m, "Tensor", py::module_local());
  py::detail::get_type_info(typeid(Tensor))->init_instance = &init_tensor_instance;
  cls.def(py::init([](const Tensor& t) { return t; }), py::arg("data"),
          "A new handle to the same tensor (shares value and autograd state).")
      .def_property_readonly("shape", &shape_tuple)
      .def("size", [](const Tensor& t, py::object d) -> py::object {
        if (d.is_none()) return shape_tuple(t);
        return py::int_(t.size(int_arg(d, "size", "dim")));
      }, py::arg("dim") = py::none())
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("stride", [](const Tensor& t) { return py::tuple(py::cast(t.strides())); })
      .def_property_readonly("_id", [](const Tensor& t) { return t.impl()->id; })
      .def("__hash__", [](const Tensor& t) { return py::hash(py::int_(reinterpret_cast<uintptr_t>(t.impl()))); })
      .def("_same", &Tensor::same, "True when both handles are the same tensor.")
      // fetch points
      .def("item", &item_of)
      .def("tolist", [](const Tensor& t) { return numpy_of(t, false).attr("tolist")(); })
      .def("__array__", [](const Tensor& t, py::object dtype) {
        py::object a = numpy_of(t, true);  // np.asarray(t) may be written, as t.numpy()
        return dtype.is_none() ? a : a.attr("astype")(dtype);
      }, py::arg("dtype") = py::none())
      .def("__float__", [](const Tensor& t) { return without_gil([&] { return t.item<double>(); }); })
      .def("__int__", [](const Tensor& t) { return without_gil([&] { return t.item<int64_t>(); }); })
      .def("__bool__", [](const Tensor& t) {
        if (t.numel() != 1)
          throw std::invalid_argument("[bool] the truth value of a tensor of shape " + shape_str(t.shape()) +
                                      " is ambiguous");
        return without_gil([&] { return t.item<double>(); }) != 0.0;
      })
      .def("__len__", [](const Tensor& t) {
        if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
        return t.shape()[0];
      })
      // autograd
      .def_property("requires_grad", &Tensor::requires_grad,
                    [](Tensor& t, bool on) { t.requires_grad_(on); })
      .def("requires_grad_", [](Tensor& t, bool on) { t.requires_grad_(on); return t; },
           py::arg("requires_grad") = true)
      .def_property("grad", [](const Tensor& t) -> py::object {
        Tensor g = t.grad();
        return g.defined() ? py::cast(g) : py::none();
      }, [](const Tensor& t, py::object g) { t.set_grad(g.is_none() ? Tensor() : g.cast<Tensor>()); })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      // torch's name style for the node that made this tensor ("mul" -> "MulBackward0"): repr shows it
      .def_property_readonly("_grad_fn_name", [](const Tensor& t) -> py::object {
        const auto& fn = t.impl()->grad_fn;
        if (!fn || !fn->op) return py::none();
        std::string name;
        bool up = true;
        for (const char* c = fn->op->name; *c; ++c) {
          if (*c == '_') { up = true; continue; }
          name += up ? char(std::toupper(static_cast<unsigned char>(*c))) : *c;
          up = false;
        }
        return py::str(name + "Backward0");
      })
      .def("backward", [](const Tensor& t, py::object gradient) {
        t.backward(gradient.is_none() ? Tensor() : gradient.cast<Tensor>());
      }, py::arg("gradient") = py::none())
      .def("detach", &Tensor::detach)
      .def_property("data", &Tensor::detach, [](const Tensor& t, const Tensor& v) {
        NoGradGuard g;
        t.copy_(v);
      })
      // shape and views
      .def("reshape", [](const Tensor& t, py::args a) { return t.reshape(shape_from_args(a, "reshape")); })
      .def("view", [](const Tensor& t, py::args a) { return t.view(shape_from_args(a, "view")); })
      .def("transpose", [](const Tensor& t, Int a, Int b) {
        return t.transpose(a.get("transpose", "dim0"), b.get("transpose", "dim1"));
      }, py::arg("dim0"), py::arg("dim1"))
      .def("permute", [](const Tensor& t, py::args a) { return t.permute(shape_from_args(a, "permute")); })
      .def("t", &Tensor::t)
      .def_property_readonly("T", [](const Tensor& t) {
        std::vector<int64_t> d;
        for (int64_t i = t.dim() - 1; i >= 0; --i) d.push_back(i);
        return t.permute(d);
      })
      .def("slice", [](const Tensor& t, Int d, Int s, Int e, Int st) {
        return t.slice(d.get("slice", "dim"), s.get("slice", "start"), e.get("slice", "end"), st.get("slice", "step"));
      }, py::arg("dim"), py::arg("start"), py::arg("end"), py::arg("step") = py::int_(1))
      .def("select", [](const Tensor& t, Int d, Int i) {
        return t.select(d.get("select", "dim"), i.get("select", "index"));
      }, py::arg("dim"), py::arg("index"))
      .def("expand", [](const Tensor& t, py::args a) { return t.expand(shape_from_args(a, "expand")); })
      .def("squeeze", [](const Tensor& t, py::object d) {
        if (!d.is_none()) return t.squeeze(int_arg(d, "squeeze", "dim"));
        Tensor r = t;
        for (int64_t i = t.dim() - 1; i >= 0; --i)
          if (t.shape()[size_t(i)] == 1) r = r.squeeze(i);
        return r;
      }, py::arg("dim") = py::none())
      .def("unsqueeze", [](const Tensor& t, Int d) { return t.unsqueeze(d.get("unsqueeze", "dim")); }, py::arg("dim"))
      .def("flatten", [](const Tensor& t, Int s, Int e) {
        return t.flatten(s.get("flatten", "start_dim"), e.get("flatten", "end_dim"));
      }, py::arg("start_dim") = py::int_(0), py::arg("end_dim") = py::int_(-1))
      .def("contiguous", &Tensor::contiguous)
      .def("clone", &Tensor::clone)
      .def("to", [](const Tensor& t, py::object d) { return t.to(dtype_from_object(d)); }, py::arg("dtype"))
      .def("float", [](const Tensor& t) { return t.to(DType::Float32); })
      .def("double", [](const Tensor& t) { return t.to(DType::Float64); })
      .def("long", [](const Tensor& t) { return t.to(DType::Int64); })
      .def("bool", [](const Tensor& t) { return t.to(DType::Bool); })
      // reductions
      .def("sum", [](const Tensor& t, py::object dim, bool keepdim) {
        return sum(t, dims_from_object(dim, "sum"), keepdim);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("mean", [](const Tensor& t, py::object dim, bool keepdim) {
        return mean(t, dims_from_object(dim, "mean"), keepdim);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      // in place
      .def("add_", [](const Tensor& t, const Tensor& o, double alpha) { return t.add_(o, alpha); },
           py::arg("other"), py::kw_only(), py::arg("alpha") = 1.0)
      .def("add_", [](const Tensor& t, double v) { return t.add_(v); })
      .def("sub_", [](const Tensor& t, const Tensor& o) { return t.sub_(o); })
      .def("sub_", [](const Tensor& t, double v) { return t.add_(-v); })
      .def("mul_", [](const Tensor& t, const Tensor& o) { no_grad_inplace("mul_", t, &o); return t.mul_(o); })
      .def("mul_", [](const Tensor& t, double v) { no_grad_inplace("mul_", t); return t.mul_(v); })
      .def("div_", [](const Tensor& t, const Tensor& o) { no_grad_inplace("div_", t, &o); return t.div_(o); })
      .def("div_", [](const Tensor& t, double v) {
        no_grad_inplace("div_", t);
        return t.div_(scalar_like(t, v));
      })
      .def("copy_", [](const Tensor& t, const Tensor& s) { return t.copy_(s); })
      .def("zero_", [](const Tensor& t) { return t.zero_(); })
      .def("fill_", [](const Tensor& t, double v) { return t.fill_(v); })
      // indexing
      .def("__getitem__", &index_of)
      .def("__setitem__", [](const Tensor& t, py::handle idx, py::object v) {
        Tensor view = index_of(t, idx);
        if (py::isinstance<Tensor>(v)) view.copy_(v.cast<Tensor>());
        else view.fill_(v.cast<double>());
      })
      // operators (Python scalars stay scalars: they do not widen a float tensor)
      .def("__add__", [](const Tensor& a, const Tensor& b) { return a + b; }, py::is_operator())
      .def("__add__", [](const Tensor& a, double b) { return a + b; }, py::is_operator())
      // Tensor-Tensor reflected methods: a subclass's generic slot (Parameter's) calls them
      // first when the left operand is a terra.Tensor (number_slots.cpp), and the double
      // overload would read a one-element tensor through __float__.
      .def("__radd__", [](const Tensor& a, const Tensor& b) { return b + a; }, py::is_operator())
      .def("__radd__", [](const Tensor& a, double b) { return b + a; }, py::is_operator())
      .def("__sub__", [](const Tensor& a, const Tensor& b) { return a - b; }, py::is_operator())
      .def("__sub__", [](const Tensor& a, double b) { return a - b; }, py::is_operator())
      .def("__rsub__", [](const Tensor& a, const Tensor& b) { return b - a; }, py::is_operator())
      .def("__rsub__", [](const Tensor& a, double b) { return b - a; }, py::is_operator())
      .def("__mul__", [](const Tensor& a, const Tensor& b) { return a * b; }, py::is_operator())
      .def("__mul__", [](const Tensor& a, double b) { return a * b; }, py::is_operator())
      .def("__rmul__", [](const Tensor& a, const Tensor& b) { return b * a; }, py::is_operator())
      .def("__rmul__", [](const Tensor& a, double b) { return b * a; }, py::is_operator())
      .def("__truediv__", [](const Tensor& a, const Tensor& b) { return a / b; }, py::is_operator())
      .def("__truediv__", [](const Tensor& a, double b) { return a / b; }, py::is_operator())
      .def("__rtruediv__", [](const Tensor& a, const Tensor& b) { return b / a; }, py::is_operator())
      .def("__rtruediv__", [](const Tensor& a, double b) { return b / a; }, py::is_operator())
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, py::is_operator())
      .def("__neg__", [](const Tensor& a) { return -a; })
      .def("__pos__", [](const Tensor& a) { return a; })
      .def("__iadd__", [](const Tensor& a, const Tensor& b) { return a.add_(b); }, py::is_operator())
      .def("__iadd__", [](const Tensor& a, double b) { return a.add_(b); }, py::is_operator())
      .def("__isub__", [](const Tensor& a, const Tensor& b) { return a.sub_(b); }, py::is_operator())
      .def("__isub__", [](const Tensor& a, double b) { return a.add_(-b); }, py::is_operator())
      .def("__imul__", [](const Tensor& a, const Tensor& b) { no_grad_inplace("mul_", a, &b); return a.mul_(b); },
           py::is_operator())
      .def("__imul__", [](const Tensor& a, double b) { no_grad_inplace("mul_", a); return a.mul_(b); },
           py::is_operator())
      .def("__itruediv__", [](const Tensor& a, const Tensor& b) { no_grad_inplace("div_", a, &b); return a.div_(b); },
           py::is_operator())
      .def("__itruediv__", [](const Tensor& a, double b) {
        no_grad_inplace("div_", a);
        return a.div_(scalar_like(a, b));
      }, py::is_operator());
  install_number_slots(cls);  // after the operator methods: defining one resets its slot

  m.def("_from_numpy", [](py::array a, py::object dtype) { return from_numpy(a, dtype_from_object(dtype)); },
        py::arg("array"), py::arg("dtype"), "A fresh tensor holding a copy of the array, cast to dtype.");
}

}  // namespace terra::python
