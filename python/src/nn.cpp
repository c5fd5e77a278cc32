// nnD: the C++ layers (terra::nn) as terra._terra._nn.*, and the initializers as _nn_init.*.
// terra/nn/layers.py wraps them: the Python Parameters are the C++ modules' own tensors.
#include <terra/nn/attention.h>
#include <terra/nn/conv.h>
#include <terra/nn/embedding.h>
#include <terra/nn/init.h>
#include <terra/nn/linear.h>
#include <terra/nn/module.h>
#include <terra/nn/norm.h>

#include "binding.h"

namespace terra::python {

namespace {
py::object opt(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }
}  // namespace

void bind_nn(py::module_& m) {
  auto n = m.def_submodule("_nn", "C++ layers (wrapped by terra.nn)");
  using nn::Module;
  py::class_<Module, std::shared_ptr<Module>>(n, "Module")
      .def("forward", [](Module& self, const Tensor& x) { return self.forward(x); })
      .def("named_parameters", &Module::named_parameters)
      .def("named_buffers", &Module::named_buffers)
      .def("parameters", &Module::parameters)
      .def("train", &Module::train, py::arg("mode") = true)
      .def("is_training", &Module::is_training)
      .def("name", &Module::name);

  py::class_<nn::Linear, Module, std::shared_ptr<nn::Linear>>(n, "Linear")
      .def(py::init([](Int i, Int o, bool b) {
        return std::make_shared<nn::Linear>(i.get("nn.Linear", "in_features"), o.get("nn.Linear", "out_features"), b);
      }), py::arg("in_features"), py::arg("out_features"),
           py::arg("bias") = true)
      .def_readonly("in_features", &nn::Linear::in_features)
      .def_readonly("out_features", &nn::Linear::out_features);
  py::class_<nn::Conv2d, Module, std::shared_ptr<nn::Conv2d>>(n, "Conv2d")
      .def(py::init([](Int i, Int o, Int k, Int s, Int p, Int d, Int g, bool b) {
        const char* op = "nn.Conv2d";
        return std::make_shared<nn::Conv2d>(i.get(op, "in_channels"), o.get(op, "out_channels"),
                                            k.get(op, "kernel_size"), s.get(op, "stride"), p.get(op, "padding"),
                                            d.get(op, "dilation"), g.get(op, "groups"), b);
      }), py::arg("in_channels"),
           py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1, py::arg("padding") = 0,
           py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true)
      .def_readonly("in_channels", &nn::Conv2d::in_channels)
      .def_readonly("out_channels", &nn::Conv2d::out_channels)
      .def_readonly("kernel_size", &nn::Conv2d::kernel_size)
      .def_readonly("stride", &nn::Conv2d::stride)
      .def_readonly("padding", &nn::Conv2d::padding)
      .def_readonly("dilation", &nn::Conv2d::dilation)
      .def_readonly("groups", &nn::Conv2d::groups);
  py::class_<nn::ConvTranspose2d, Module, std::shared_ptr<nn::ConvTranspose2d>>(n, "ConvTranspose2d")
      .def(py::init([](Int i, Int o, Int k, Int s, Int p, Int op_, Int g, bool b, Int d) {
        const char* op = "nn.ConvTranspose2d";
        return std::make_shared<nn::ConvTranspose2d>(i.get(op, "in_channels"), o.get(op, "out_channels"),
                                                     k.get(op, "kernel_size"), s.get(op, "stride"),
                                                     p.get(op, "padding"), op_.get(op, "output_padding"),
                                                     g.get(op, "groups"), b, d.get(op, "dilation"));
      }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("bias") = true,
           py::arg("dilation") = 1)
      .def_readonly("in_channels", &nn::ConvTranspose2d::in_channels)
      .def_readonly("out_channels", &nn::ConvTranspose2d::out_channels)
      .def_readonly("kernel_size", &nn::ConvTranspose2d::kernel_size)
      .def_readonly("stride", &nn::ConvTranspose2d::stride)
      .def_readonly("padding", &nn::ConvTranspose2d::padding)
      .def_readonly("output_padding", &nn::ConvTranspose2d::output_padding)
      .def_readonly("dilation", &nn::ConvTranspose2d::dilation)
      .def_readonly("groups", &nn::ConvTranspose2d::groups);
  py::class_<nn::BatchNorm2d, Module, std::shared_ptr<nn::BatchNorm2d>>(n, "BatchNorm2d")
      .def(py::init([](Int n, double eps, double momentum, bool affine) {
        return std::make_shared<nn::BatchNorm2d>(n.get("nn.BatchNorm2d", "num_features"), eps, momentum, affine);
      }), py::arg("num_features"), py::arg("eps") = 1e-5,
           py::arg("momentum") = 0.1, py::arg("affine") = true)
      .def_readonly("num_features", &nn::BatchNorm2d::num_features)
      .def_readonly("eps", &nn::BatchNorm2d::eps)
      .def_readonly("momentum", &nn::BatchNorm2d::momentum);
  py::class_<nn::LayerNorm, Module, std::shared_ptr<nn::LayerNorm>>(n, "LayerNorm")
      .def(py::init([](py::object shape, double eps, bool affine) {
        return std::make_shared<nn::LayerNorm>(shape_from_object(shape, "nn.LayerNorm"), eps, affine);
      }), py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true)
      .def_readonly("normalized_shape", &nn::LayerNorm::normalized_shape)
      .def_readonly("eps", &nn::LayerNorm::eps);
  py::class_<nn::Embedding, Module, std::shared_ptr<nn::Embedding>>(n, "Embedding")
      .def(py::init([](Int n, Int d) {
        return std::make_shared<nn::Embedding>(n.get("nn.Embedding", "num_embeddings"),
                                               d.get("nn.Embedding", "embedding_dim"));
      }), py::arg("num_embeddings"), py::arg("embedding_dim"))
      .def_readonly("num_embeddings", &nn::Embedding::num_embeddings)
      .def_readonly("embedding_dim", &nn::Embedding::embedding_dim);
  py::class_<nn::MultiheadAttention, Module, std::shared_ptr<nn::MultiheadAttention>>(n, "MultiheadAttention")
      .def(py::init([](Int e, Int h, double dropout, bool bias) {
        return std::make_shared<nn::MultiheadAttention>(e.get("nn.MultiheadAttention", "embed_dim"),
                                                        h.get("nn.MultiheadAttention", "num_heads"), dropout, bias);
      }), py::arg("embed_dim"), py::arg("num_heads"),
           py::arg("dropout") = 0.0, py::arg("bias") = true)
      .def("forward", [](nn::MultiheadAttention& self, const Tensor& q, const Tensor& k, const Tensor& v,
                         const py::object& mask, const py::object& kpm) {
        return self.forward(q, k, v, opt_tensor(mask), opt_tensor(kpm));
      }, py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(),
         py::arg("key_padding_mask") = py::none())
      .def_readonly("embed_dim", &nn::MultiheadAttention::embed_dim)
      .def_readonly("num_heads", &nn::MultiheadAttention::num_heads)
      .def_readonly("head_dim", &nn::MultiheadAttention::head_dim)
      .def_readonly("dropout", &nn::MultiheadAttention::dropout)
      .def_readonly("out_proj", &nn::MultiheadAttention::out_proj)
      .def_static("causal_mask", &nn::MultiheadAttention::causal_mask, py::arg("size"));

  auto init = m.def_submodule("_nn_init", "terra::nn::init (wrapped by terra.nn.init)");
  using T = const Tensor&;
  init.def("calculate_fan_in_and_fan_out", &nn::init::calculate_fan_in_and_fan_out);
  init.def("calculate_gain", &nn::init::calculate_gain, py::arg("nonlinearity"), py::arg("param") = 0.01);
  init.def("uniform_", [](T t, double a, double b) { nn::init::uniform_(t, a, b); return t; }, py::arg("tensor"),
           py::arg("a") = 0.0, py::arg("b") = 1.0);
  init.def("normal_", [](T t, double mean, double std) { nn::init::normal_(t, mean, std); return t; },
           py::arg("tensor"), py::arg("mean") = 0.0, py::arg("std") = 1.0);
  init.def("constant_", [](T t, double v) { nn::init::constant_(t, v); return t; }, py::arg("tensor"), py::arg("val"));
  init.def("zeros_", [](T t) { nn::init::zeros_(t); return t; }, py::arg("tensor"));
  init.def("ones_", [](T t) { nn::init::ones_(t); return t; }, py::arg("tensor"));
  init.def("kaiming_uniform_", [](T t, double a, const std::string& mode, const std::string& nl) {
    nn::init::kaiming_uniform_(t, a, mode, nl);
    return t;
  }, py::arg("tensor"), py::arg("a") = 0.0, py::arg("mode") = "fan_in", py::arg("nonlinearity") = "leaky_relu");
  init.def("kaiming_normal_", [](T t, double a, const std::string& mode, const std::string& nl) {
    nn::init::kaiming_normal_(t, a, mode, nl);
    return t;
  }, py::arg("tensor"), py::arg("a") = 0.0, py::arg("mode") = "fan_in", py::arg("nonlinearity") = "leaky_relu");
  init.def("xavier_uniform_", [](T t, double g) { nn::init::xavier_uniform_(t, g); return t; }, py::arg("tensor"),
           py::arg("gain") = 1.0);
  init.def("xavier_normal_", [](T t, double g) { nn::init::xavier_normal_(t, g); return t; }, py::arg("tensor"),
           py::arg("gain") = 1.0);
  (void)opt;
}

}  // namespace terra::python
