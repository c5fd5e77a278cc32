#include "terra/runtime/engine.h"

#include <chrono>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <thread>

#include "terra/runtime/coexec.h"
#include "terra/runtime/lazy.h"
#include "terra/trace/location.h"

namespace terra {

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Eager: return "eager";
    case Mode::CoExecution: return "coexec";
    case Mode::Lazy: return "lazy";
  }
  return "?";
}

Mode parse_mode(const std::string& s) {
  if (s == "eager") return Mode::Eager;
  if (s == "coexec" || s == "co-execution" || s == "coexecution") return Mode::CoExecution;
  if (s == "lazy") return Mode::Lazy;
  throw std::invalid_argument("[Engine] unknown mode '" + s + "' (expected eager, coexec or lazy)");
}

class EngineImpl {
 public:
  explicit EngineImpl(Mode m) : mode_(m), owner_(std::this_thread::get_id()) {
    if (m == Mode::CoExecution) co_ = std::make_unique<runtime::CoExecSession>(stats_);
    if (m == Mode::Lazy) lazy_ = std::make_unique<runtime::LazyExec>(stats_);
    if (const char* dir = std::getenv("TERRA_EXPLAIN")) set_explain(dir);
  }
  ~EngineImpl() {
    if (co_) co_->close_quietly();  // errors nobody will see again are reported, never thrown
  }

  void check_thread(const char* what) const {
    if (std::this_thread::get_id() != owner_)
      throw std::invalid_argument(std::string("[Engine] ") + what +
                                  " called from a thread other than the one that created the engine");
  }

  void begin(void* base) {
    check_thread("step()");
    if (in_step_) throw std::invalid_argument("[Engine] step() called while another step of this engine is active");
    in_step_ = true;
    prev_base_ = trace::step_base();
    trace::set_step_base(base);
    t0_ = std::chrono::steady_clock::now();
    try {
      if (co_) co_->begin_step();
      if (lazy_) {
        if (!stack_) stack_ = ExecutorStack::of_this_thread();
        stack_->push(lazy_.get());
      }
    } catch (...) {
      in_step_ = false;
      trace::set_step_base(prev_base_);
      throw;
    }
  }

  // Ends the step; with `exception` false it raises errors the step (or an earlier one) computed
  // that surfaced only now, after the engine's state is consistent again.
  void end(bool exception) {
    if (!in_step_) return;
    if (std::this_thread::get_id() != owner_) {
      // A step ended on another thread: the engine's thread-local state is not reachable from here.
      in_step_ = false;
      if (co_) co_->abort_step();
      if (lazy_) stack_->remove(lazy_.get());
      throw std::invalid_argument("[Engine] a step ended on a thread other than the one that began it (abandoned)");
    }
    in_step_ = false;
    trace::set_step_base(prev_base_);
    stats_.steps++;
    if (co_) {
      if (exception) co_->abort_step();
      else co_->end_step();
      return;
    }
    if (lazy_) {
      stack_->remove(lazy_.get());
      lazy_->barrier(/*raise=*/!exception);  // values recorded before an exception are still owed
    }
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    stats_.host_busy_s += dt;
  }

  void synchronize() {
    if (co_) co_->synchronize();
    if (lazy_) lazy_->barrier(/*raise=*/true);
  }

  void set_explain(const std::string& dir) {
    if (co_) co_->set_explain(dir);
  }

  Mode mode_;
  Stats stats_;
  std::thread::id owner_;
  std::unique_ptr<runtime::CoExecSession> co_;
  std::unique_ptr<runtime::LazyExec> lazy_;
  std::shared_ptr<ExecutorStack> stack_;
  void* prev_base_ = nullptr;
  bool in_step_ = false;
  std::chrono::steady_clock::time_point t0_;
};

Step::Step(std::shared_ptr<EngineImpl> e) : engine_(std::move(e)), uncaught_(std::uncaught_exceptions()) {}
Step::Step(Step&& o) noexcept : engine_(std::move(o.engine_)), uncaught_(o.uncaught_) {}
Step::~Step() noexcept(false) {
  if (!engine_) return;
  std::shared_ptr<EngineImpl> e = std::move(engine_);
  bool unwinding = std::uncaught_exceptions() > uncaught_;
  if (unwinding) {
    try {
      e->end(true);
    } catch (...) {
    }
  } else {
    e->end(false);
  }
}
void Step::end() {
  if (!engine_) return;
  std::shared_ptr<EngineImpl> e = std::move(engine_);
  e->end(false);
}

void Step::abort() {
  if (!engine_) return;
  std::shared_ptr<EngineImpl> e = std::move(engine_);
  e->end(true);
}

Engine::Engine(Mode mode) : impl_(std::make_shared<EngineImpl>(mode)) {}
// A Step still alive keeps the engine's state; it is released when that step ends.
Engine::~Engine() = default;

__attribute__((noinline)) Step Engine::step() {
#if defined(__x86_64__)
  // The caller's stack pointer at this call (our frame address + saved fp + return address): frames
  // at or above it are the caller's and its callers'. Not the caller's saved frame pointer: a caller
  // compiled without frame pointers leaves any value there.
  void* base = static_cast<char*>(__builtin_frame_address(0)) + 2 * sizeof(void*);
#else
  // Elsewhere the frame record need not sit at the top of the frame: the caller's frame pointer.
  void* base = static_cast<void**>(__builtin_frame_address(0))[0];
#endif
  impl_->begin(base);
  return Step(impl_);
}

Stats Engine::stats() const { return impl_->stats_; }
const runtime::CoExecSession* Engine::coexec() const { return impl_->co_.get(); }
Mode Engine::mode() const { return impl_->mode_; }
void Engine::synchronize() { impl_->synchronize(); }
void Engine::close() { impl_->synchronize(); }
void Engine::set_explain(const std::string& dir) { impl_->set_explain(dir); }

}  // namespace terra
