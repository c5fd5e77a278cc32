// Owning containers: Sequential (chains single-input forwards) and ModuleList (holds modules for a
// hand-written forward). Both keep their modules behind std::shared_ptr, so they can be moved and
// nested freely; children are named "0", "1", ... as in torch.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "terra/nn/module.h"

namespace terra::nn {

namespace detail {
template <class T>
struct is_module_ptr : std::false_type {};
template <class T>
struct is_module_ptr<std::shared_ptr<T>> : std::is_base_of<Module, T> {};
template <class T>
concept ModuleArg = std::is_base_of_v<Module, std::decay_t<T>> || is_module_ptr<std::decay_t<T>>::value;
}  // namespace detail

class ModuleList : public Module {
 public:
  ModuleList() = default;
  // Modules by value (moved in) or as std::shared_ptr (shared).
  template <detail::ModuleArg... Ms>
    requires(sizeof...(Ms) > 0)
  explicit ModuleList(Ms&&... ms) {
    (push_back(std::forward<Ms>(ms)), ...);
  }

  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    static_assert(std::is_base_of_v<Module, M>, "push_back needs a terra::nn::Module");
    if (!m) throw std::invalid_argument("[nn::" + name() + "] push_back of a null module");
    register_module(std::to_string(items_.size()), m);
    items_.push_back(m);
    return m;
  }
  template <class M>
    requires std::is_base_of_v<Module, std::decay_t<M>>
  std::shared_ptr<std::decay_t<M>> push_back(M&& m) {
    static_assert(!std::is_lvalue_reference_v<M>,
                  "modules are not copyable: pass a temporary, std::move, or a std::shared_ptr");
    return push_back(std::make_shared<std::decay_t<M>>(std::forward<M>(m)));
  }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  Module& operator[](size_t i) const { return *checked(i); }
  const std::shared_ptr<Module>& ptr(size_t i) const { return checked(i); }
  // The i-th module as its concrete type (throws std::invalid_argument on a type mismatch).
  template <class M>
  M& at(size_t i) const {
    auto* m = dynamic_cast<M*>(checked(i).get());
    if (!m) throw std::invalid_argument("[nn::" + name() + "] module " + std::to_string(i) + " is a " +
                                        checked(i)->name() + ", not the requested type");
    return *m;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  std::string name() const override { return "ModuleList"; }

 private:
  const std::shared_ptr<Module>& checked(size_t i) const {
    if (i >= items_.size())
      throw std::out_of_range("[nn::" + name() + "] index " + std::to_string(i) + " out of range for " +
                              std::to_string(items_.size()) + " modules");
    return items_[i];
  }
  std::vector<std::shared_ptr<Module>> items_;
};

// Sequential seq(Linear(4, 8), ReLU(), Linear(8, 2)); seq(x) runs them in order.
class Sequential : public ModuleList {
 public:
  using ModuleList::ModuleList;
  // A Linear directly followed by a ReLU runs as one fused op (terra::linear_relu, same bits).
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Sequential"; }
};

}  // namespace terra::nn
