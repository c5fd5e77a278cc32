#include "terra/nn/module.h"

#include <stdexcept>

namespace terra::nn {

void Module::take(Module&& other) {
  for (const Child& c : other.children_)
    if (!c.owner)
      throw std::logic_error("[nn::Module] cannot move a " + other.name() + " whose child '" + c.name +
                             "' is registered by reference; hold it by std::shared_ptr instead");
  params_ = std::move(other.params_);
  buffers_ = std::move(other.buffers_);
  children_ = std::move(other.children_);
  training_ = other.training_;
  other.params_.clear();
  other.buffers_.clear();
  other.children_.clear();
}

Module::Module(Module&& other) { take(std::move(other)); }

Module& Module::operator=(Module&& other) {
  if (this != &other) take(std::move(other));
  return *this;
}

Tensor Module::forward(const Tensor&) {
  throw std::logic_error("[nn::Module] " + name() + " does not implement forward(const Tensor&)");
}

void Module::check_name(const std::string& name, const char* what) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw std::invalid_argument(std::string("[nn::Module::") + what + "] invalid name '" + name +
                                "' (must be non-empty and contain no '.')");
  auto taken = [&](const auto& list) {
    for (const auto& e : list)
      if (e->first == name) return true;
    return false;
  };
  bool dup = taken(params_) || taken(buffers_);
  for (const Child& c : children_) dup = dup || c.name == name;
  if (dup)
    throw std::invalid_argument(std::string("[nn::Module::") + what + "] name '" + name + "' is already registered in " +
                                this->name());
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  check_name(name, "register_parameter");
  if (!t.defined()) throw std::invalid_argument("[nn::Module::register_parameter] '" + name + "' is undefined");
  if (!t.is_leaf()) t = t.detach();
  t.requires_grad_(true);
  params_.push_back(std::make_unique<std::pair<std::string, Tensor>>(name, std::move(t)));
  return params_.back()->second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name, "register_buffer");
  if (!t.defined()) throw std::invalid_argument("[nn::Module::register_buffer] '" + name + "' is undefined");
  buffers_.push_back(std::make_unique<std::pair<std::string, Tensor>>(name, std::move(t)));
  return buffers_.back()->second;
}

void Module::register_module(const std::string& name, Module& child) { add_child(name, &child, nullptr); }

void Module::add_child(const std::string& name, Module* m, std::shared_ptr<Module> owner) {
  check_name(name, "register_module");
  if (!m) throw std::invalid_argument("[nn::Module::register_module] '" + name + "' is null");
  if (m == this) throw std::invalid_argument("[nn::Module::register_module] a module cannot be its own child");
  children_.push_back({name, m, std::move(owner)});
}

void Module::collect_params(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& p : params_) out.emplace_back(prefix + p->first, p->second);
  for (const Child& c : children_) c.module->collect_params(prefix + c.name + ".", out);
}

void Module::collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& b : buffers_) out.emplace_back(prefix + b->first, b->second);
  for (const Child& c : children_) c.module->collect_buffers(prefix + c.name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_params("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_buffers("", out);
  return out;
}

std::vector<Tensor> Module::buffers() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, Module*>> out;
  for (const Child& c : children_) out.emplace_back(c.name, c.module);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (Child& c : children_) c.module->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

}  // namespace terra::nn
