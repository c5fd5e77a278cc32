// Executors: what an op call does after validation (eager by default; tracing, skeleton and lazy
// plug in here), and the per-thread stack engines install them on.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "terra/core/op.h"

namespace terra {

class Executor {
 public:
  virtual ~Executor() = default;
  // Produce outputs for one call whose shapes were already inferred into `meta`.
  virtual TensorList run(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                         const TensorMetas& meta, PhiloxKey rng) = 0;
  // Asked first, for every call this executor will run: the outputs' metas when the executor
  // knows the call already (an earlier call of the same node with inputs of the same shapes and
  // dtypes, whose inference and output checks passed), so dispatch skips both; null otherwise.
  // dispatch calls it directly, as it calls run (trace::location_is with skip 1 works from it).
  // The metas must stay in place until run returns (run gets them).
  virtual const TensorMetas* known_outputs(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs) {
    (void)op, (void)in, (void)attrs;
    return nullptr;
  }
  // The host is about to read `t` (item, to_vector, data_ptr): a fetch point.
  virtual void on_fetch(const Tensor& t) { (void)t; }
  // `t` was made from host data (tensor(...), scalars): a feed point.
  virtual void on_external(const Tensor& t) { (void)t; }
};

// Engines and their steps may end in any order, and an engine may be destroyed on another thread
// than the one it ran on, so entries are removed wherever they are; the top one handles the
// owning thread's op calls. Engines keep the stack of their thread alive (shared_ptr).
class ExecutorStack {
 public:
  static std::shared_ptr<ExecutorStack> of_this_thread();
  void push(Executor* e);
  void remove(Executor* e);                // no-op when absent
  // `old` leaves (when present) and `now` goes on top (`top` true) or to the bottom. An engine
  // whose step begins goes on top, one whose step ended to the bottom: an idle engine created
  // later must not take the calls of another engine's open step.
  void move(Executor* old, Executor* now, bool top);
  Executor* top() const { return top_.load(std::memory_order_acquire); }

 private:
  void update();  // with mu_ held
  std::mutex mu_;
  std::vector<Executor*> entries_;
  std::atomic<Executor*> top_{nullptr};
};

Executor* current_executor();  // nullptr: eager

// Installs an executor on this thread for the scope's life (tools, benchmarks).
class ExecutorScope {
 public:
  explicit ExecutorScope(Executor* e);
  ~ExecutorScope();
  ExecutorScope(const ExecutorScope&) = delete;
  ExecutorScope& operator=(const ExecutorScope&) = delete;

 private:
  std::shared_ptr<ExecutorStack> stack_;
  Executor* e_;
};

// Runs this thread's op calls eagerly for the scope's life, whatever executors are installed (a
// host thread running kernel chunks for its GraphRunner while it waits, runtime/lend_core.h).
class EagerScope {
 public:
  EagerScope();
  ~EagerScope();
  EagerScope(const EagerScope&) = delete;
  EagerScope& operator=(const EagerScope&) = delete;

 private:
  ExecutorStack* saved_;
};

}  // namespace terra
