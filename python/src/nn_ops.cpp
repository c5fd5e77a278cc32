// opsB: linear, convolutions, pooling, upsampling, batch and layer normalization, fused attention.
#include "binding.h"

namespace terra::python {

void bind_nn_ops(py::module_& m) {
  using T = const Tensor&;
  using O = const py::object&;
  m.def("linear", [](T x, T w, O b) { return linear(x, w, opt_tensor(b)); }, py::arg("input"), py::arg("weight"),
        py::arg("bias") = py::none());
  // relu(linear(...)) as one fused op (what nn.Sequential's Linear + ReLU runs in C++).
  m.def("linear_relu", [](T x, T w, O b) { return linear_relu(x, w, opt_tensor(b)); }, py::arg("input"),
        py::arg("weight"), py::arg("bias") = py::none());
  m.def("conv2d", [](T x, T w, O b, O stride, O padding, O dilation, int64_t groups) {
    return conv2d(x, w, opt_tensor(b), int2_from_object(stride, "conv2d"), int2_from_object(padding, "conv2d"),
                  int2_from_object(dilation, "conv2d"), groups);
  }, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
     py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1);
  m.def("conv_transpose2d", [](T x, T w, O b, O stride, O padding, O output_padding, int64_t groups, O dilation) {
    return conv_transpose2d(x, w, opt_tensor(b), int2_from_object(stride, "conv_transpose2d"),
                            int2_from_object(padding, "conv_transpose2d"),
                            int2_from_object(output_padding, "conv_transpose2d"), groups,
                            int2_from_object(dilation, "conv_transpose2d"));
  }, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
     py::arg("padding") = 0, py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("dilation") = 1);
  // stride None -> the kernel size (torch's default).
  m.def("max_pool2d", [](T x, O k, O stride, O padding) {
    auto kk = int2_from_object(k, "max_pool2d");
    return max_pool2d(x, kk, stride.is_none() ? kk : int2_from_object(stride, "max_pool2d"),
                      int2_from_object(padding, "max_pool2d"));
  }, py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
  m.def("avg_pool2d", [](T x, O k, O stride, O padding, bool cip) {
    auto kk = int2_from_object(k, "avg_pool2d");
    return avg_pool2d(x, kk, stride.is_none() ? kk : int2_from_object(stride, "avg_pool2d"),
                      int2_from_object(padding, "avg_pool2d"), cip);
  }, py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0,
     py::arg("count_include_pad") = true);
  m.def("adaptive_avg_pool2d", [](T x, O size) {
    return adaptive_avg_pool2d(x, int2_from_object(size, "adaptive_avg_pool2d"));
  }, py::arg("input"), py::arg("output_size"));
  m.def("upsample_nearest2d", [](T x, O size, O scale) {
    if (!size.is_none()) return upsample_nearest2d(x, int2_from_object(size, "upsample_nearest2d"));
    if (scale.is_none()) throw std::invalid_argument("[upsample_nearest2d] give size or scale_factor");
    return upsample_nearest2d(x, scale.cast<double>());
  }, py::arg("input"), py::arg("size") = py::none(), py::arg("scale_factor") = py::none());
  m.def("batch_norm", [](T x, O rm, O rv, O w, O b, bool training, double momentum, double eps) {
    return batch_norm(x, opt_tensor(w), opt_tensor(b), opt_tensor(rm), opt_tensor(rv), training, momentum, eps);
  }, py::arg("input"), py::arg("running_mean"), py::arg("running_var"), py::arg("weight") = py::none(),
     py::arg("bias") = py::none(), py::arg("training") = false, py::arg("momentum") = 0.1, py::arg("eps") = 1e-5);
  m.def("layer_norm", [](T x, O shape, O w, O b, double eps) {
    return layer_norm(x, shape_from_object(shape, "layer_norm"), opt_tensor(w), opt_tensor(b), eps);
  }, py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
     py::arg("eps") = 1e-5);
  m.def("scaled_dot_product_attention", [](T q, T k, T v, O mask, bool is_causal, O scale) {
    return scaled_dot_product_attention(q, k, v, opt_tensor(mask), is_causal,
                                        scale.is_none() ? std::nullopt : std::optional<double>(scale.cast<double>()));
  }, py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(),
     py::arg("is_causal") = false, py::arg("scale") = py::none());
  for (const char* n : {"linear", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
                        "upsample_nearest2d", "batch_norm", "layer_norm", "scaled_dot_product_attention"})
    expose(m, n);
}

}  // namespace terra::python
