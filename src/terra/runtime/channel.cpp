#include "terra/runtime/channel.h"

#include "terra/core/random.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace terra::runtime {

std::shared_ptr<ValueCell> StepState::host_cell(uint64_t p) {
  std::lock_guard<std::mutex> g(mu);
  if (cells.size() <= p) {
    cells.resize(p + 1);
    pinned.resize(p + 1);
  }
  if (auto c = cells[p].lock()) {
    pinned[p].reset();
    return c;
  }
  auto c = std::make_shared<ValueCell>();
  if (error && p >= error_pos) c->error = error;
  cells[p] = c;
  return c;
}

void StepState::runner_fail(uint64_t pos, std::exception_ptr err) {
  std::lock_guard<std::mutex> g(mu);
  error = err;
  error_pos = pos;
  for (uint64_t p = pos; p < cells.size(); ++p)
    if (auto c = cells[p].lock()) c->error = err;
}

void StepState::rewind_random() {
  uint64_t failed;
  {
    std::lock_guard<std::mutex> g(mu);
    if (!error) return;
    failed = error_pos;
  }
  for (const auto& [pos, key] : random_keys)
    if (pos > failed) {
      set_generator_state({key.seed, key.offset});
      return;
    }
}

Tensor FeedValue::resolve() const {
  if (!cell) return tensor;
  if (cell->error) throw PropagatedError{cell->error};
  if (out >= cell->values.size() || !cell->values[out].defined())
    throw std::runtime_error("[coexec] a value fed to this step was never computed (its step was abandoned)");
  return cell->values[out];
}

namespace {
template <class E>
bool try_rethrow(std::exception_ptr err, const std::string& context) {
  try {
    std::rethrow_exception(err);
  } catch (const E& e) {
    throw E(std::string(e.what()) + context);
  } catch (...) {
  }
  return false;
}
}  // namespace

void rethrow_with_context(std::exception_ptr err, const std::string& context) {
  // Most derived first: the program sees the exception type eager would have raised.
  try_rethrow<std::invalid_argument>(err, context);
  try_rethrow<std::out_of_range>(err, context);
  try_rethrow<std::domain_error>(err, context);
  try_rethrow<std::length_error>(err, context);
  try_rethrow<std::overflow_error>(err, context);
  try_rethrow<std::underflow_error>(err, context);
  try_rethrow<std::range_error>(err, context);
  try_rethrow<std::runtime_error>(err, context);
  try_rethrow<std::logic_error>(err, context);
  std::rethrow_exception(err);
}

void StepState::runner_store(uint64_t p, const std::vector<Tensor>& outs) {
  std::lock_guard<std::mutex> g(mu);
  if (cells.size() <= p) {
    cells.resize(p + 1);
    pinned.resize(p + 1);
    auto c = std::make_shared<ValueCell>();
    c->values = outs;
    cells[p] = c;
    pinned[p] = c;
    return;
  }
  if (auto c = cells[p].lock()) c->values = outs;
}

bool debug_protocol() {
  static const bool on = std::getenv("TERRA_DEBUG_PROTOCOL") != nullptr;
  return on;
}

void Channel::push(Message m) {
  if (debug_protocol())
    std::fprintf(stderr, "  host -> kind=%d id=%u seq=%llu value=%u\n", int(m.kind), m.id, (unsigned long long)m.seq,
                 m.value);
  {
    std::lock_guard<std::mutex> g(mu_);
    q_.push_back(std::move(m));
  }
  cv_.notify_one();
}

Message& Channel::peek() {
  std::unique_lock<std::mutex> g(mu_);
  if (q_.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    cv_.wait(g, [&] { return !q_.empty(); });
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    waited_s_.store(waited_s_.load(std::memory_order_relaxed) + dt, std::memory_order_relaxed);
  }
  return q_.front();
}

Message Channel::pop() {
  peek();
  std::lock_guard<std::mutex> g(mu_);
  Message m = std::move(q_.front());
  q_.pop_front();
  return m;
}

}  // namespace terra::runtime
