// Typed op attributes. Comparable and hashable: trace matching and graph caches key on them.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "terra/core/dtype.h"

namespace terra {

using AttrValue = std::variant<int64_t, double, bool, std::vector<int64_t>, DType>;

class Attrs {
 public:
  using Item = std::pair<const char*, AttrValue>;  // names are string literals
  Attrs() = default;
  // Out of line on purpose: inlined into a call site with a constant list, g++ 12 -O3 follows the
  // variant copy into alternatives the list never holds and prints false -Wmaybe-uninitialized /
  // -Wstringop-overflow / -Warray-bounds walls. One call per op costs nothing next to the vector.
  Attrs(std::initializer_list<Item> items);

  Attrs& set(const char* name, AttrValue v);
  bool has(const char* name) const { return find(name) != nullptr; }
  int64_t i(const char* name) const { return get<int64_t>(name); }
  double f(const char* name) const { return get<double>(name); }
  bool b(const char* name) const { return get<bool>(name); }
  const std::vector<int64_t>& ints(const char* name) const { return get<std::vector<int64_t>>(name); }
  DType dtype(const char* name) const { return get<DType>(name); }

  template <class T>
  const T& get(const char* name) const {
    const AttrValue* v = find(name);
    if (!v || !std::holds_alternative<T>(*v)) missing(name);
    return std::get<T>(*v);
  }

  const std::vector<Item>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  bool operator==(const Attrs& o) const;
  bool operator!=(const Attrs& o) const { return !(*this == o); }
  size_t hash() const;
  // Two calls at one call site (Terra's symbolic dimensions): -1 if a guard fails -- another name,
  // type or list length (rank), another bool/dtype value, or another structural value (dim(s),
  // reduction, ignore_index, ...: these change what the op computes);
  // otherwise a bit per item whose value differs (ints, doubles and lists of one length may vary:
  // the graph takes them per call). `guard` receives what failed, for explain output.
  int64_t varying(const Attrs& o, std::string* guard = nullptr) const;
  std::string item_str(size_t k) const;  // "shape=[4,8]"
  std::string str() const;  // "dim=1, keepdim=true"

 private:
  const AttrValue* find(const char* name) const;
  [[noreturn]] void missing(const char* name) const;
  std::vector<Item> items_;
};

}  // namespace terra
