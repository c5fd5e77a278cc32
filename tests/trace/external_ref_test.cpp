// How the tracer keys a tensor that enters a step from outside: parameters by identity, their
// detached aliases as the parameter, host data made in the step as fresh (fed at once), 0-d
// literals by value.
#include <gtest/gtest.h>

#include <terra/terra.h>

#include "terra/core/tensor.h"
#include "terra/trace/trace.h"

using namespace terra;

TEST(ExternalRef, ParameterIsKeyedByIdentity) {
  Tensor w = randn({3, 2});
  uint64_t first = next_tensor_id();
  trace::ExternalRef r = trace::external_ref(w.impl_ptr(), first);
  EXPECT_EQ(r.key, w.impl()->id);
  EXPECT_EQ(r.tensor.get(), w.impl());
}

TEST(ExternalRef, DetachedAliasStandsForTheTensorItAliases) {
  Tensor w = randn({3, 2});
  uint64_t first = next_tensor_id();
  Tensor a = w.detach();  // what autograd saves for backward, a new tensor every step
  Tensor b = a.detach();
  trace::ExternalRef r = trace::external_ref(b.impl_ptr(), first);
  EXPECT_EQ(r.key, w.impl()->id);
  EXPECT_EQ(r.tensor.get(), w.impl());
}

TEST(ExternalRef, AliasOfAStepLocalTensorIsFresh) {
  uint64_t first = next_tensor_id();
  Tensor x = randn({4});  // host data made inside the step
  Tensor a = x.detach();
  EXPECT_EQ(trace::external_ref(x.impl_ptr(), first).key, trace::kFreshKey);
  EXPECT_EQ(trace::external_ref(a.impl_ptr(), first).key, trace::kFreshKey);
}

TEST(ExternalRef, ScalarLiteralsAreKeyedByValue) {
  uint64_t first = next_tensor_id();
  Tensor h = scalar_tensor(0.5), k = scalar_tensor(0.5), m = scalar_tensor(0.25);
  uint64_t kh = trace::external_ref(h.impl_ptr(), first).key;
  EXPECT_TRUE(trace::is_constant_key(kh));
  EXPECT_EQ(kh, trace::external_ref(k.impl_ptr(), first).key);
  EXPECT_NE(kh, trace::external_ref(m.impl_ptr(), first).key);
}
