// The per-thread executor stack: scopes install and remove executors; EagerScope hides them.
#include <gtest/gtest.h>

#include <thread>

#include "terra/core/executor.h"

namespace terra {
namespace {

struct NullExecutor : Executor {
  TensorList run(const OpDef&, std::span<const Tensor>, const Attrs&, const TensorMetas&,
                 PhiloxKey) override {
    return {};
  }
};

TEST(Executor, EagerScopeHidesThisThreadsExecutorsAndRestoresThem) {
  NullExecutor a, b;
  EXPECT_EQ(current_executor(), nullptr);
  {
    ExecutorScope sa(&a);
    EXPECT_EQ(current_executor(), &a);
    {
      EagerScope eager;  // a host thread running a kernel chunk for its runner
      EXPECT_EQ(current_executor(), nullptr);
      // Other threads keep theirs: the scope is this thread's only.
      std::thread([&] {
        ExecutorScope sb(&b);
        EXPECT_EQ(current_executor(), &b);
      }).join();
    }
    EXPECT_EQ(current_executor(), &a);
  }
  EXPECT_EQ(current_executor(), nullptr);
  EagerScope on_a_thread_without_a_stack;
  EXPECT_EQ(current_executor(), nullptr);
}

}  // namespace
}  // namespace terra
