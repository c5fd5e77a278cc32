// nnD: the C++ optimizers (terra::optim) as terra._terra._optim.*; terra/optim.py wraps them.
#include <terra/optim/adam.h>
#include <terra/optim/optimizer.h>
#include <terra/optim/sgd.h>

#include "binding.h"

namespace terra::python {

void bind_optim(py::module_& m) {
  auto o = m.def_submodule("_optim", "C++ optimizers (wrapped by terra.optim)");
  using optim::Optimizer;
  py::class_<Optimizer, std::shared_ptr<Optimizer>>(o, "Optimizer")
      .def("step", &Optimizer::step)
      .def("zero_grad", &Optimizer::zero_grad)
      .def_property("lr", &Optimizer::lr, &Optimizer::set_lr)
      .def_property_readonly("step_count", &Optimizer::step_count)
      .def("params", &Optimizer::params)
      .def("state", &Optimizer::state);
  py::class_<optim::SGD, Optimizer, std::shared_ptr<optim::SGD>>(o, "SGD")
      .def(py::init<std::vector<Tensor>, double, double, double, double, bool>(), py::arg("params"), py::arg("lr"),
           py::arg("momentum") = 0.0, py::arg("dampening") = 0.0, py::arg("weight_decay") = 0.0,
           py::arg("nesterov") = false)
      .def_readonly("momentum", &optim::SGD::momentum)
      .def_readonly("dampening", &optim::SGD::dampening)
      .def_readonly("weight_decay", &optim::SGD::weight_decay)
      .def_readonly("nesterov", &optim::SGD::nesterov);
  py::class_<optim::Adam, Optimizer, std::shared_ptr<optim::Adam>>(o, "Adam")
      .def(py::init<std::vector<Tensor>, double, std::pair<double, double>, double, double>(), py::arg("params"),
           py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999), py::arg("eps") = 1e-8,
           py::arg("weight_decay") = 0.0)
      .def_readonly("beta1", &optim::Adam::beta1)
      .def_readonly("beta2", &optim::Adam::beta2)
      .def_readonly("eps", &optim::Adam::eps)
      .def_readonly("weight_decay", &optim::Adam::weight_decay)
      .def("exp_avg", &optim::Adam::exp_avg)
      .def("exp_avg_sq", &optim::Adam::exp_avg_sq);
  py::class_<optim::AdamW, optim::Adam, std::shared_ptr<optim::AdamW>>(o, "AdamW")
      .def(py::init<std::vector<Tensor>, double, std::pair<double, double>, double, double>(), py::arg("params"),
           py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999), py::arg("eps") = 1e-8,
           py::arg("weight_decay") = 1e-2);
}

}  // namespace terra::python
