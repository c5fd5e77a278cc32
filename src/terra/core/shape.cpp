#include "terra/core/shape.h"

#include <sstream>
#include <stdexcept>

namespace terra {

int64_t numel_of(const Shape& s) { return numel_of("numel", s); }

int64_t numel_of(const char* op, const Shape& s) {
  int64_t n = 1, bound = 1;
  for (int64_t d : s) {
    if (__builtin_mul_overflow(bound, d > 0 ? d : 1, &bound))
      throw std::invalid_argument(std::string("[") + op + "] shape " + shape_str(s) +
                                  " has more elements than int64 can count");
    n *= d;  // |n| <= bound: cannot overflow
  }
  return n;
}

void check_shape(const char* op, const Shape& s, size_t itemsize) {
  for (int64_t d : s)
    if (d < 0) throw std::invalid_argument(std::string("[") + op + "] negative dimension in shape " + shape_str(s));
  int64_t n = numel_of(op, s), bytes;
  if (__builtin_mul_overflow(n, int64_t(itemsize), &bytes))
    throw std::invalid_argument(std::string("[") + op + "] shape " + shape_str(s) + " needs more than 2^63 bytes");
}

int64_t checked_mul(const char* op, int64_t a, int64_t b, const std::string& what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw std::invalid_argument(std::string("[") + op + "] " + what + " overflows int64 (" + std::to_string(a) +
                                " * " + std::to_string(b) + ")");
  return r;
}

int64_t checked_add(const char* op, int64_t a, int64_t b, const std::string& what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw std::invalid_argument(std::string("[") + op + "] " + what + " overflows int64 (" + std::to_string(a) +
                                " + " + std::to_string(b) + ")");
  return r;
}

int64_t contiguous_layout(const Shape& s, Shape& strides) {
  strides.resize_for_overwrite(s.size());  // every entry is written below
  int64_t bound = 1, n = 1;
  for (size_t i = s.size(); i-- > 0;) {
    strides[i] = bound;
    if (__builtin_mul_overflow(bound, s[i] > 0 ? s[i] : 1, &bound))
      throw std::invalid_argument("[strides] shape " + shape_str(s) + " has more elements than int64 can count");
    n *= s[i];  // |n| <= bound: cannot overflow
  }
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st;
  contiguous_layout(s, st);
  return st;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

void PrintTo(const Shape& s, std::ostream* os) { *os << shape_str(s); }

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  if (a == b) return a;
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(std::string("[") + op + "] shapes " + shape_str(a) + " and " +
                                  shape_str(b) + " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(const char* op, int64_t dim, int64_t rank) {
  int64_t r = rank == 0 ? 1 : rank;  // a 0-d tensor accepts dim 0 and -1, as torch does
  // std::out_of_range, as torch raises IndexError here (Python maps out_of_range to IndexError).
  if (dim < -r || dim >= r)
    throw std::out_of_range(std::string("[") + op + "] dim " + std::to_string(dim) +
                            " is out of range for a tensor of rank " + std::to_string(rank) +
                            " (expected to be in range of [" + std::to_string(-r) + ", " + std::to_string(r - 1) + "])");
  return dim < 0 ? dim + r : dim;
}

}  // namespace terra
