#include "terra/core/executor.h"

#include <algorithm>
#include <utility>

namespace terra {
namespace {
thread_local std::shared_ptr<ExecutorStack> t_stack;
thread_local ExecutorStack* t_stack_raw = nullptr;  // the fast path of current_executor()
}  // namespace

std::shared_ptr<ExecutorStack> ExecutorStack::of_this_thread() {
  if (!t_stack) {
    t_stack = std::make_shared<ExecutorStack>();
    t_stack_raw = t_stack.get();
  }
  return t_stack;
}

void ExecutorStack::update() { top_.store(entries_.empty() ? nullptr : entries_.back(), std::memory_order_release); }

void ExecutorStack::push(Executor* e) {
  std::lock_guard<std::mutex> g(mu_);
  entries_.push_back(e);
  update();
}

void ExecutorStack::remove(Executor* e) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = std::find(entries_.rbegin(), entries_.rend(), e);
  if (it == entries_.rend()) return;
  entries_.erase(std::next(it).base());
  update();
}

void ExecutorStack::move(Executor* old, Executor* now, bool top) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = std::find(entries_.rbegin(), entries_.rend(), old);
  if (it != entries_.rend()) entries_.erase(std::next(it).base());
  entries_.insert(top ? entries_.end() : entries_.begin(), now);
  update();
}

Executor* current_executor() { return t_stack_raw ? t_stack_raw->top() : nullptr; }

EagerScope::EagerScope() : saved_(std::exchange(t_stack_raw, nullptr)) {}
EagerScope::~EagerScope() { t_stack_raw = saved_; }

ExecutorScope::ExecutorScope(Executor* e) : stack_(ExecutorStack::of_this_thread()), e_(e) { stack_->push(e); }
ExecutorScope::~ExecutorScope() { stack_->remove(e_); }

}  // namespace terra
