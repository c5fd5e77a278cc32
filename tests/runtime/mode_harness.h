// Runs one program under each Mode and collects what it observed, so tests can compare the
// modes value for value against eager.
#pragma once
#include <functional>
#include <vector>

#include <terra/terra.h>

namespace terra::testing {

struct Observed {
  std::vector<std::vector<double>> values;  // whatever the program chose to record, in order
  Stats stats;
};

// `program(engine, observe)` runs the whole training loop; observe(t) records t's values.
inline Observed run_in_mode(Mode m, const std::function<void(Engine&, const std::function<void(const Tensor&)>&)>& program,
                            uint64_t seed = 0) {
  manual_seed(seed);
  Observed o;
  {
    Engine engine(m);
    auto observe = [&](const Tensor& t) { o.values.push_back(t.to_vector<double>()); };
    program(engine, observe);
    engine.synchronize();
    o.stats = engine.stats();
  }
  return o;
}

// Bit-identical comparison (same kernels in the same order).
inline void expect_same(const Observed& eager, const Observed& other, const char* mode) {
  ASSERT_EQ(eager.values.size(), other.values.size()) << mode;
  for (size_t i = 0; i < eager.values.size(); ++i) {
    ASSERT_EQ(eager.values[i].size(), other.values[i].size()) << mode << " observation " << i;
    for (size_t k = 0; k < eager.values[i].size(); ++k)
      ASSERT_EQ(eager.values[i][k], other.values[i][k]) << mode << " observation " << i << " element " << k;
  }
}

}  // namespace terra::testing
