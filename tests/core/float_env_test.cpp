// Denormals in terra's kernels (core/float_env.h): flushed to zero by default, IEEE's gradual
// underflow when switched off, the same bits in every mode either way (kernels run on the caller,
// pool workers, the GraphRunner and lazy barriers), and the user's thread keeps its own environment.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include <terra/terra.h>

#ifdef TERRA_HAS_MXCSR
#include <xmmintrin.h>
#endif

using namespace terra;

namespace {

// Restores the process-wide setting whatever a test does.
struct FlushSetting {
  bool was = flush_denormal();
  ~FlushSetting() { set_flush_denormal(was); }
};

uint32_t bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Per step: a vector large enough to be split over the pool, halved until it underflows, and the
// first element of a product whose exact result is denormal. Returns every step's values.
std::vector<float> underflowing_program(Mode mode) {
  Engine eng(mode);
  Tensor m = full({1 << 18}, 1e-36);
  std::vector<float> out;
  for (int s = 0; s < 40; ++s) {
    auto st = eng.step();
    m = m * 0.5f;
    Tensor tiny = full({3}, 1e-30) * 1e-9f;
    out.push_back(m.to_vector<float>()[12345]);
    out.push_back(m.sum().item<float>());
    out.push_back(tiny.to_vector<float>()[1]);
  }
  return out;
}

}  // namespace

#ifdef TERRA_HAS_MXCSR
TEST(FloatEnv, KernelsFlushDenormalsByDefault) {
  FlushSetting keep;
  ASSERT_TRUE(flush_denormal()) << "the default";
  const std::vector<float> v = (full({1 << 18}, 1e-30) * 1e-9f).to_vector<float>();
  for (size_t i = 0; i < v.size(); i += 997) EXPECT_EQ(v[i], 0.0f) << "element " << i;
  ASSERT_TRUE(set_flush_denormal(false));
  volatile float a = 1e-30f, b = 1e-9f;  // this thread: IEEE, as the user left it
  const float ieee = a * b;
  ASSERT_GT(ieee, 0.0f);
  const std::vector<float> w = (full({1 << 18}, 1e-30) * 1e-9f).to_vector<float>();
  for (size_t i = 0; i < w.size(); i += 997) EXPECT_EQ(bits(w[i]), bits(ieee)) << "element " << i;
}

TEST(FloatEnv, EveryModeGivesEagersBitsWithAndWithoutFlushing) {
  FlushSetting keep;
  for (bool flush : {true, false}) {
    set_flush_denormal(flush);
    const std::vector<float> eager = underflowing_program(Mode::Eager);
    // Step 7's halving (1e-36 / 256) and the tiny product are below FLT_MIN: 0 only when flushed.
    // Step 39's halving is below the smallest denormal: 0 either way.
    EXPECT_EQ(eager[3 * 7] == 0.0f, flush);
    EXPECT_EQ(eager.back() == 0.0f, flush);
    EXPECT_EQ(eager[3 * 39], 0.0f);
    for (Mode mode : {Mode::Lazy, Mode::CoExecution}) {
      const std::vector<float> got = underflowing_program(mode);
      ASSERT_EQ(got.size(), eager.size());
      for (size_t i = 0; i < eager.size(); ++i)
        EXPECT_EQ(bits(got[i]), bits(eager[i])) << mode_name(mode) << (flush ? " flushing" : " IEEE") << " value " << i;
    }
  }
}

TEST(FloatEnv, TheCallersThreadKeepsItsEnvironment) {
  FlushSetting keep;
  set_flush_denormal(true);
  const unsigned before = _mm_getcsr() & 0x8040u;
  ASSERT_EQ(before, 0u) << "the test thread starts with IEEE underflow";
  Tensor x = full({1 << 18}, 1e-30) * 1e-9f;
  EXPECT_EQ(_mm_getcsr() & 0x8040u, before);
  EXPECT_THROW(full({2, 3}, 1.0) + full({4}, 1.0), std::invalid_argument);  // an op that fails
  EXPECT_EQ(_mm_getcsr() & 0x8040u, before);
  volatile float a = 1e-30f, b = 1e-9f;
  EXPECT_GT(a * b, 0.0f) << "the user's own arithmetic still underflows gradually";
}
#endif
