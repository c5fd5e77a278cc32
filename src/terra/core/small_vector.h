// A std::vector-like container that keeps up to N elements inline and goes to the heap beyond.
// Shapes and strides are built and freed for every op (often freed on another thread than the
// one that allocated them), so avoiding malloc/free for the common small case matters.
// Restricted to trivially copyable element types: copies are memcpy, no destructors run.
#pragma once
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace terra {

template <class T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "SmallVector copies elements with memcpy");
  static_assert(N > 0);

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVector() noexcept = default;
  explicit SmallVector(size_t n) { resize(n); }
  SmallVector(size_t n, const T& v) { assign(n, v); }
  template <std::input_iterator It>
  SmallVector(It first, It last) { assign(first, last); }
  SmallVector(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  // Implicit both ways: attributes and a few APIs hold std::vector (see core/attrs.h).
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT

  SmallVector(const SmallVector& o) { copy_from(o); }
  SmallVector(SmallVector&& o) noexcept { move_from(o); }
  ~SmallVector() { release(); }

  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) {
      size_ = 0;
      copy_from(o);
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      release();
      reset_inline();
      move_from(o);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }

  void assign(size_t n, const T& v) {
    T copy = v;  // v may alias an element
    size_ = 0;
    reserve(n);
    std::fill_n(data_, n, copy);
    size_ = static_cast<uint32_t>(n);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    size_ = 0;
    if constexpr (std::forward_iterator<It>) {
      size_t n = static_cast<size_t>(std::distance(first, last));
      reserve(n);
      std::copy(first, last, data_);
      size_ = static_cast<uint32_t>(n);
    } else {
      for (; first != last; ++first) push_back(*first);
    }
  }
  void assign(std::initializer_list<T> il) { assign(il.begin(), il.end()); }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return cap_; }
  static constexpr size_t inline_capacity() noexcept { return N; }
  size_t max_size() const noexcept { return UINT32_MAX; }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T& operator[](size_t i) noexcept { return data_[i]; }
  const T& operator[](size_t i) const noexcept { return data_[i]; }
  T& at(size_t i) {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  T& front() noexcept { return data_[0]; }
  const T& front() const noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }

  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  const_reverse_iterator crbegin() const noexcept { return rbegin(); }
  const_reverse_iterator crend() const noexcept { return rend(); }

  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  void clear() noexcept { size_ = 0; }
  void resize(size_t n) { resize(n, T()); }
  // The size without filling new elements: the caller writes every one of them next (a shape's
  // strides per tensor made; filling first cost a memset call).
  void resize_for_overwrite(size_t n) requires std::is_trivially_copyable_v<T> {
    reserve(n);
    size_ = static_cast<uint32_t>(n);
  }
  void resize(size_t n, const T& v) {
    if (n > size_) {
      T copy = v;
      reserve(n);
      std::fill(data_ + size_, data_ + n, copy);
    }
    size_ = static_cast<uint32_t>(n);
  }
  void push_back(const T& v) {
    if (size_ == cap_) {
      T copy = v;  // v may alias an element that grow() frees
      grow(next_capacity(size_ + 1));
      data_[size_++] = copy;
    } else {
      data_[size_++] = v;
    }
  }
  template <class... A>
  T& emplace_back(A&&... a) {
    push_back(T(std::forward<A>(a)...));
    return back();
  }
  void pop_back() noexcept { --size_; }

  iterator insert(const_iterator pos, const T& v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t n, const T& v) {
    T copy = v;
    size_t i = make_gap(pos, n);
    std::fill_n(data_ + i, n, copy);
    return data_ + i;
  }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    if constexpr (std::forward_iterator<It>) {
      // Through a temporary: the range may point into *this, which make_gap can move.
      SmallVector tmp(first, last);
      size_t i = make_gap(pos, tmp.size());
      std::copy(tmp.begin(), tmp.end(), data_ + i);
      return data_ + i;
    } else {
      size_t i = static_cast<size_t>(pos - data_);
      for (size_t k = i; first != last; ++first, ++k) insert(data_ + k, *first);
      return data_ + i;
    }
  }
  iterator insert(const_iterator pos, std::initializer_list<T> il) { return insert(pos, il.begin(), il.end()); }
  template <class... A>
  iterator emplace(const_iterator pos, A&&... a) {
    return insert(pos, T(std::forward<A>(a)...));
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    T* f = data_ + (first - data_);
    T* l = data_ + (last - data_);
    std::copy(l, end(), f);
    size_ -= static_cast<uint32_t>(l - f);
    return f;
  }

  void swap(SmallVector& o) noexcept {
    SmallVector tmp(std::move(o));
    o = std::move(*this);
    *this = std::move(tmp);
  }
  friend void swap(SmallVector& a, SmallVector& b) noexcept { a.swap(b); }

  friend bool operator==(const SmallVector& a, const SmallVector& b) noexcept {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend auto operator<=>(const SmallVector& a, const SmallVector& b) noexcept {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool is_inline() const noexcept { return data_ == inline_; }
  void reset_inline() noexcept {
    data_ = inline_;
    size_ = 0;
    cap_ = N;
  }
  void release() noexcept {
    if (!is_inline()) ::operator delete(data_);
  }
  static size_t next_capacity(size_t need) { return std::max(need, size_t{2} * N); }
  // Reallocates to hold at least n elements, keeping the first size_.
  void grow(size_t n) {
    if (n > max_size()) throw std::length_error("SmallVector: too many elements");
    size_t cap = std::max(n, size_t{2} * cap_);
    if (cap > max_size()) cap = max_size();
    T* p = static_cast<T*>(::operator new(cap * sizeof(T)));
    if (size_) std::memcpy(p, data_, size_ * sizeof(T));
    release();
    data_ = p;
    cap_ = static_cast<uint32_t>(cap);
  }
  // Opens n uninitialized slots at pos; returns pos's index.
  size_t make_gap(const_iterator pos, size_t n) {
    size_t i = static_cast<size_t>(pos - data_);
    if (size_ + n > cap_) grow(size_ + n);
    std::memmove(data_ + i + n, data_ + i, (size_ - i) * sizeof(T));
    size_ += static_cast<uint32_t>(n);
    return i;
  }
  // Both expect *this empty (size_ == 0) with whatever buffer it has.
  // A short vector copies all N slots in one fixed-size copy (a few vector moves, no call to
  // memcpy): every buffer holds at least N (a heap one only exists past N).
  void copy_from(const SmallVector& o) {
    reserve(o.size_);
    if (o.size_ <= N) std::memcpy(data_, o.data_, N * sizeof(T));
    else std::memcpy(data_, o.data_, o.size_ * sizeof(T));
    size_ = o.size_;
  }
  void move_from(SmallVector& o) noexcept {
    if (o.is_inline()) {
      std::memcpy(inline_, o.inline_, sizeof(inline_));
      size_ = o.size_;
    } else {
      data_ = o.data_;
      size_ = o.size_;
      cap_ = o.cap_;
    }
    o.reset_inline();
  }

  T* data_ = inline_;
  uint32_t size_ = 0;
  uint32_t cap_ = N;
  T inline_[N];
};

}  // namespace terra
