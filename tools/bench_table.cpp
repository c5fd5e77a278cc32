#include "bench_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace terra::bench {

std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// A plain text table: columns right-aligned except the first two.
void print_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                 int left_cols) {
  std::vector<size_t> w(head.size());
  for (size_t c = 0; c < head.size(); ++c) w[c] = head[c].size();
  for (auto& r : rows)
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t c = 0; c < head.size(); ++c) {
      std::string v = c < r.size() ? r[c] : "";
      std::string pad(w[c] - std::min(w[c], v.size()), ' ');
      s += (int(c) < left_cols ? v + pad : pad + v) + (c + 1 < head.size() ? "  " : "");
    }
    std::printf("%s\n", s.c_str());
  };
  line(head);
  std::string rule;
  for (size_t c = 0; c < head.size(); ++c) rule += std::string(w[c], '-') + (c + 1 < head.size() ? "  " : "");
  std::printf("%s\n", rule.c_str());
  for (auto& r : rows) line(r);
}

double geomean(const std::vector<double>& v) {
  double s = 0;
  int n = 0;
  for (double x : v)
    if (std::isfinite(x) && x > 0) {
      s += std::log(x);
      ++n;
    }
  return n ? std::exp(s / n) : NAN;
}

double median_of(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace terra::bench
