// terra-bench's plain text output: number formatting, aligned tables, medians, geometric means.
#pragma once
#include <string>
#include <vector>

namespace terra::bench {

std::string fmt(const char* f, double v);  // printf of one number; "-" for NAN
// Columns right-aligned except the first `left_cols`.
void print_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                 int left_cols = 2);
double geomean(const std::vector<double>& v);  // of the finite positive entries; NAN if none
double median_of(std::vector<double> v);       // of the finite entries; NAN if none

}  // namespace terra::bench
