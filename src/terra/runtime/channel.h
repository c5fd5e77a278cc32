// What the host (skeleton program) and the GraphRunner share for one step, and the FIFO of
// messages from host to runner: path choices, loop conditions, feeds/validations, step markers.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "terra/core/op.h"

namespace terra::graph {
struct SymbolicGraph;
}

namespace terra::runtime {

// Outputs of one op instance, shared with the host's placeholders.
struct ValueCell {
  std::vector<Tensor> values;
};

struct StepState {
  uint64_t uid = 0;
  std::shared_ptr<const graph::SymbolicGraph> graph;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::weak_ptr<ValueCell>> cells;   // by position in the step
  std::vector<std::shared_ptr<ValueCell>> pinned;  // runner got there first: kept until validated
  std::atomic<uint64_t> done{0};                   // op instances the runner finished
  std::atomic<uint64_t> abort_at{~0ull};           // stop once `done` reaches this (fallback)
  std::atomic<bool> host_waiting{false};           // the runner notifies only then
  bool finished = false;                           // guarded by mu
  std::exception_ptr error;                        // guarded by mu
  uint64_t error_pos = 0;                          // position of the op that failed (guarded by mu)
  // The failure belongs to the program only if the host validated that op; a speculative op past
  // the host's path may fail (or lack an input) just before the host falls back.
  std::exception_ptr error_before(uint64_t validated) {
    std::lock_guard<std::mutex> g(mu);
    return error && error_pos < validated ? error : nullptr;
  }

  // Host: the cell for position `p` (creating it, or adopting the runner's).
  std::shared_ptr<ValueCell> host_cell(uint64_t p);
  // Runner: stores outputs of position `p` where the host may still read them.
  void runner_store(uint64_t p, const std::vector<Tensor>& outs);
};

// A feed: a host tensor, or a value of an earlier step the host only holds a placeholder for.
struct FeedValue {
  Tensor tensor;
  std::shared_ptr<ValueCell> cell;
  uint32_t out = 0;
  Tensor resolve() const { return cell ? cell->values.at(out) : tensor; }
};

struct Message {
  enum Kind : uint8_t { StepBegin, Choice, LoopCond, Validate, StepEnd, Abort, Shutdown } kind;
  uint32_t id = 0;     // switch id, loop node id or op node id
  uint64_t seq = 0;    // host position when sent
  uint32_t value = 0;  // case index (kSkipped: the path did not pass this switch) / 1 = iterate, 0 = exit
  static constexpr uint32_t kSkipped = ~0u;
  std::vector<FeedValue> feeds;  // Validate: per input (set for fed inputs)
  std::vector<uint32_t> phi;     // Validate: per input, chosen candidate for phi inputs (may exceed 255)
  PhiloxKey rng;
  std::shared_ptr<StepState> step;  // StepBegin
};

// TERRA_DEBUG_PROTOCOL=1 logs every message and runner action to stderr (engine debugging).
bool debug_protocol();

class Channel {
 public:
  void push(Message m);
  Message& peek();  // blocks until a message is there
  Message pop();
  double waited_s() const { return waited_s_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> q_;
  double waited_s_ = 0;  // runner-side blocking time
};

}  // namespace terra::runtime
