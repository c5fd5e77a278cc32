// nn::Module: the base of every layer. Holds named parameters, buffers and child modules, and the
// train/eval switch. Parameters are ordinary leaf tensors (requires_grad) that optimizers update in
// place, so the handles a module hands out stay valid for its whole life.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "terra/core/tensor.h"

namespace terra::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Copying would silently share parameters: modules move instead. A move keeps parameters,
  // buffers and owned children; it throws when non-owning children are registered, since their
  // addresses would still point into the moved-from object (hold such modules by shared_ptr).
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&& other);
  Module& operator=(Module&& other);

  // Single-input forward used by Sequential and operator(); layers override it.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  // Layer name for messages and printing, e.g. "Linear".
  virtual std::string name() const { return "Module"; }

  // Own parameters, then each registered child's (recursively), in registration order.
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> buffers() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  std::vector<std::pair<std::string, Module*>> named_children() const;

  // Non-owning: `child` must outlive *this (the usual case: a member of the derived module).
  void register_module(const std::string& name, Module& child);
  // Owning: *this keeps the child alive.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    add_child(name, child.get(), child);
    return child;
  }
  // Stores `t` (detached if it has history) with requires_grad on; returns the stored handle.
  Tensor& register_parameter(const std::string& name, Tensor t);
  // State that is not trained (e.g. BatchNorm's running stats): no requires_grad.
  Tensor& register_buffer(const std::string& name, Tensor t);

  // Sets the mode of this module and every child.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Sets every parameter's grad to undefined.
  void zero_grad();

 private:
  struct Child {
    std::string name;
    Module* module;
    std::shared_ptr<Module> owner;  // null for non-owning registrations
  };
  void add_child(const std::string& name, Module* m, std::shared_ptr<Module> owner);
  void check_name(const std::string& name, const char* what) const;
  void collect_params(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  void collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  void take(Module&& other);

  // Vectors of unique_ptr: the Tensor& handed out by register_* stays valid across later
  // registrations and across moves of the module.
  std::vector<std::unique_ptr<std::pair<std::string, Tensor>>> params_;
  std::vector<std::unique_ptr<std::pair<std::string, Tensor>>> buffers_;
  std::vector<Child> children_;
  bool training_ = true;
};

}  // namespace terra::nn
