// A co-executed step's placeholder values on the host (SkelPending) and the host's hold on a slot
// while it makes them (SlotRef): shared by the session (coexec.cpp), which settles and releases
// kept placeholders, and the per-call path (coexec_calls.cpp), which makes them.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "terra/core/shape.h"
#include "terra/core/tensor.h"
#include "terra/runtime/channel.h"

namespace terra::runtime {

// Waits until the runner has finished `n` ops of the step (or the step ended without them), and
// raises the step's error if an op the host validated before `n` failed (coexec.cpp).
void wait_step(StepState& st, uint64_t n);

// A skeleton placeholder's value: output `out` of the op at `seq` in a co-executed step. Holds a
// reference to its position's slot: the runner keeps the values only while one is alive. Once the
// step finished, the host settles it (takes the value) and later releases the slot and the step,
// so a placeholder kept for many steps costs what an eager tensor costs (see CoExecSession::kept_).
// The host finds the live ones on their slots' lists (SlotLink).
struct SkelPending : PendingValue, SlotLink {
  std::shared_ptr<StepState> step;  // null once released, or claimed by the destructor
  CellSlot* slot;
  uint32_t out;
  uint64_t seq;
  Tensor settled;  // the runner's value, taken on the host after the step finished
  // settle/release run on the host thread while another thread may be reading this value
  // (Python's synchronize() releases the GIL) or dropping it: they, the destructor's claim and
  // materialize's reads take this lock.
  SpinLock mu;
  SkelPending(const std::shared_ptr<StepState>& st, CellSlot* s, uint32_t o, uint64_t q)
      : step(st), slot(s), out(o), seq(q) {
    // The maker holds one (never from 0). No other thread reaches the slot's count or list before
    // the call returns its placeholders: plain stores, not locked ones.
    s->refs.store(s->refs.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    next_in_slot = s->placeholders.load(std::memory_order_relaxed);
    s->placeholders.store(this, std::memory_order_relaxed);
  }
  ~SkelPending() override {
    std::shared_ptr<StepState> st;
    {
      std::lock_guard<SpinLock> g(mu);  // against the host's release walk (release below)
      st.swap(step);
    }
    if (st) st->host_release_out(*slot, out, this);  // unlinked there, under the slot's mu
  }
  // Host thread, its step finished, under the slot's mu: takes the value unless the op (or its
  // step) failed, which keeps the slot so a read re-raises the error.
  void settle() {
    std::lock_guard<SpinLock> g(mu);
    if (!step) return;  // dying on another thread (unlinked once it gets the slot's mu)
    // No value there: the step failed at or before this op, which keeps the slot so a read
    // re-raises the error (materialize, through wait_step).
    const ValueCell& cell = slot->vals->cell;
    if (!settled.defined() && out < cell.values.size()) settled = cell.values[out];
  }
  // Host thread, settled and no message still in flight names the slot, under the slot's mu:
  // gives up the step. The caller unlinks it and releases output `*o` of the slot (after the
  // slot's mu: the release may kill the slot). False when unsettled or dying.
  bool release(uint32_t* o) {
    std::lock_guard<SpinLock> g(mu);
    if (!settled.defined() || !step) return false;
    *o = out;
    step.reset();  // not the last: the walker holds the step
    slot = nullptr;
    return true;
  }
  void wait(const TensorImpl&) override {
    std::shared_ptr<StepState> st;
    {
      std::lock_guard<SpinLock> g(mu);
      if (!settled.defined()) st = step;  // kept alive through the wait, even if released meanwhile
    }
    if (st) wait_step(*st, seq + 1);
  }
  void materialize(TensorImpl& t) override {  // after wait(): the op ran, or its step ended
    std::unique_lock<SpinLock> g(mu);  // unsettled here means unreleased: the slot holds the value
    const TensorImpl* v = settled.defined() ? settled.impl() : nullptr;
    if (!v) {
      const ValueCell& cell = slot->vals->cell;
      if (std::exception_ptr err = step->error_at(seq)) {
        g.unlock();
        std::rethrow_exception(err);  // its step failed before computing it
      }
      if (out >= cell.values.size() || !cell.values[out].defined()) {
        g.unlock();
        throw std::runtime_error("[coexec] the value of shape " + shape_str(t.shape) +
                                 " was never computed (its step was abandoned before it ran)");
      }
      v = cell.values[out].impl();
      slot->pinned.store(true, std::memory_order_release);  // `t` names the value from here on
    }
    t.adopt(*v);
    g.unlock();
    t.installed();  // may destroy *this: nothing below
  }
};

// The host's own reference to a slot while it makes the position's placeholders.
class SlotRef {
 public:
  SlotRef(StepState& st, CellSlot* s) : st_(st), s_(s) {}
  // The placeholders made in the call are still on this thread: the last reference is known
  // without a locked decrement (a placeholder dropped on another thread later uses one).
  ~SlotRef() {
    const uint32_t r = s_->refs.load(std::memory_order_relaxed);
    if (r == 1) st_.host_release(*s_);
    else s_->refs.store(r - 1, std::memory_order_relaxed);
  }
  SlotRef(const SlotRef&) = delete;
  SlotRef& operator=(const SlotRef&) = delete;

 private:
  StepState& st_;
  CellSlot* s_;
};

}  // namespace terra::runtime
