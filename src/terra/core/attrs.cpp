#include "terra/core/attrs.h"

#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>

namespace terra {

Attrs::Attrs(std::initializer_list<Item> items) : items_(items) {}

Attrs& Attrs::set(const char* name, AttrValue v) {
  for (auto& [n, val] : items_)
    if (std::strcmp(n, name) == 0) {
      val = std::move(v);
      return *this;
    }
  items_.emplace_back(name, std::move(v));
  return *this;
}

const AttrValue* Attrs::find(const char* name) const {
  for (auto& [n, val] : items_)
    if (n == name || std::strcmp(n, name) == 0) return &val;
  return nullptr;
}

void Attrs::missing(const char* name) const {
  throw std::runtime_error(std::string("[attrs] attribute '") + name + "' missing or of another type in {" +
                           str() + "}");
}

bool Attrs::operator==(const Attrs& o) const {
  if (items_.size() != o.items_.size()) return false;
  for (size_t k = 0; k < items_.size(); ++k) {
    // Names are string literals, nearly always the same pointer: strcmp only where they differ.
    if (items_[k].first != o.items_[k].first && std::strcmp(items_[k].first, o.items_[k].first) != 0) return false;
    if (items_[k].second != o.items_[k].second) return false;
  }
  return true;
}

// Attributes that say which computation a call is rather than how big: a reduction over another
// dim is another call, not the same call at another size. (A conv's stride may vary: layers sharing
// a call site in a loop over blocks then share a node, which measured fewer traces than not.)
static bool structural(const char* name) {
  static const char* const kNames[] = {"dim", "dims", "reduction", "ignore_index", "padding_idx", "dtype"};
  for (const char* n : kNames)
    if (std::strcmp(n, name) == 0) return true;
  return false;
}

int64_t Attrs::varying(const Attrs& o, std::string* guard) const {
  auto fail = [&](const std::string& why) -> int64_t {
    if (guard) *guard = why;
    return -1;
  };
  if (items_.size() != o.items_.size()) return fail("another attribute list");
  int64_t mask = 0;
  for (size_t k = 0; k < items_.size(); ++k) {
    const auto& [n, v] = items_[k];
    const auto& w = o.items_[k].second;
    if (std::strcmp(n, o.items_[k].first) != 0) return fail("another attribute list");
    if (v == w) continue;
    if (v.index() != w.index()) return fail(std::string("attribute ") + n + " changed type");
    if (std::holds_alternative<bool>(v) || std::holds_alternative<DType>(v) || structural(n) || k >= 62)
      return fail(item_str(k) + " became " + o.item_str(k));
    if (auto* a = std::get_if<std::vector<int64_t>>(&v); a && a->size() != std::get<std::vector<int64_t>>(w).size())
      return fail(std::string("attribute ") + n + " changed length (rank) from " + item_str(k) + " to " + o.item_str(k));
    mask |= int64_t(1) << k;
  }
  return mask;
}

std::string Attrs::item_str(size_t k) const {
  Attrs one;
  one.items_.push_back(items_.at(k));
  return one.str();
}

static size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

size_t Attrs::hash() const {
  size_t h = items_.size();
  for (auto& [n, v] : items_) {
    h = mix(h, std::hash<std::string_view>{}(n));
    h = mix(h, v.index());
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            for (int64_t e : x) h = mix(h, std::hash<int64_t>{}(e));
          } else if constexpr (std::is_same_v<T, DType>) {
            h = mix(h, size_t(x));
          } else {
            h = mix(h, std::hash<T>{}(x));
          }
        },
        v);
  }
  return h;
}

std::string Attrs::str() const {
  std::ostringstream os;
  bool first = true;
  for (auto& [n, v] : items_) {
    os << (first ? "" : ", ") << n << '=';
    first = false;
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            os << '[';
            for (size_t k = 0; k < x.size(); ++k) os << (k ? "," : "") << x[k];
            os << ']';
          } else if constexpr (std::is_same_v<T, DType>) {
            os << dtype_name(x);
          } else if constexpr (std::is_same_v<T, bool>) {
            os << (x ? "true" : "false");
          } else {
            os << x;
          }
        },
        v);
  }
  return os.str();
}

}  // namespace terra
