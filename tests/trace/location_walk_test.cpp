// The C++ location walk over frames of code built without frame pointers (plain `g++ -O2`): what
// such code leaves in rbp is not a frame, even when it points into the stack. A trampoline written in
// assembly stands for that code: it calls with rbp pointing at a fake frame record whose words change
// every step (as a loop variable kept in rbp would). Locations must stay the same, so co-execution
// matches every step without falling back.
#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <vector>

#include <terra/terra.h>

#include "runtime/mode_harness.h"

using namespace terra;

#if defined(__x86_64__) && defined(__linux__)
// fn(a0, a1) with rbp -> [word0, word1], a frame record as a frame-pointer walk reads it.
extern "C" void terra_test_call_with_fake_frame(void* fn, void* a0, void* a1, uintptr_t word0, uintptr_t word1);
// fn(a0, a1) with rbp = value.
extern "C" void terra_test_call_with_rbp(void* fn, void* a0, void* a1, uintptr_t value);
asm(R"(
  .text
  .globl terra_test_call_with_fake_frame
  .type terra_test_call_with_fake_frame, @function
terra_test_call_with_fake_frame:
  push %rbp
  sub $16, %rsp
  mov %rcx, (%rsp)
  mov %r8, 8(%rsp)
  mov %rsp, %rbp
  mov %rdi, %rax
  mov %rsi, %rdi
  mov %rdx, %rsi
  call *%rax
  add $16, %rsp
  pop %rbp
  ret
  .size terra_test_call_with_fake_frame, .-terra_test_call_with_fake_frame

  .globl terra_test_call_with_rbp
  .type terra_test_call_with_rbp, @function
terra_test_call_with_rbp:
  push %rbp
  mov %rcx, %rbp
  mov %rdi, %rax
  mov %rsi, %rdi
  mov %rdx, %rsi
  call *%rax
  pop %rbp
  ret
  .size terra_test_call_with_rbp, .-terra_test_call_with_rbp
)");

extern "C++" {
// Engine::step by its symbol, so the trampoline can call it: the x86-64 ABI returns the non-trivial
// Step through a pointer in rdi, with `this` in rsi.
void engine_step_symbol(void* out, Engine* self) asm("_ZN5terra6Engine4stepEv");
}

namespace {
struct StepOps {
  Tensor x, w, loss;
};

__attribute__((noinline)) void run_ops(void* p, void*) {
  auto* s = static_cast<StepOps*>(p);
  s->loss = (tanh(matmul(s->x, s->w)) * 0.5).sum();
  asm volatile("" ::: "memory");  // not a tail call: the frame record above stays this frame's caller
}
}  // namespace

TEST(LocationWalk, ARbpThatIsNotAFramePointerEndsTheWalk) {
  auto program = [](Engine& engine, const std::function<void(const Tensor&)>& observe) {
    StepOps s;
    s.w = randn({8, 8}).requires_grad_(true);
    optim::SGD opt({s.w}, 0.1);
    for (int i = 0; i < 8; ++i) {
      auto step = engine.step();
      s.x = tensor(std::vector<float>(32, 0.25f * float(i)), {4, 8});  // fed: the same graph each step
      // word0 0 ends the chain after word1 (not above the record); word1 differs every step.
      terra_test_call_with_fake_frame(reinterpret_cast<void*>(&run_ops), &s, nullptr, 0,
                                      uintptr_t(0x1000) * uintptr_t(i + 1));
      opt.zero_grad();
      s.loss.backward();
      opt.step();
      observe(s.loss);
    }
  };
  auto eager = terra::testing::run_in_mode(Mode::Eager, program, 3);
  auto co = terra::testing::run_in_mode(Mode::CoExecution, program, 3);
  EXPECT_EQ(eager.values, co.values);
  EXPECT_EQ(co.stats.fallbacks, 0) << "a step's location changed with the fake record's word";
  EXPECT_EQ(co.stats.traces, 1);
}

// The step's base (frames at or above it are the caller's) is the caller's stack pointer, never the
// caller's rbp: here step() is called with rbp alternating between a tiny value and 0, which as a
// base would cut every location short in one step and not bound it in the next.
TEST(LocationWalk, TheStepsBaseIsNotTheCallersRbp) {
  auto program = [](Engine& engine, const std::function<void(const Tensor&)>& observe) {
    Tensor w = randn({8, 8}).requires_grad_(true);
    optim::SGD opt({w}, 0.1);
    for (int i = 0; i < 8; ++i) {
      alignas(Step) unsigned char raw[sizeof(Step)];
      terra_test_call_with_rbp(reinterpret_cast<void*>(&engine_step_symbol), raw, &engine, i % 2 ? 0x10 : 0);
      Step* step = std::launder(reinterpret_cast<Step*>(raw));
      Tensor x = tensor(std::vector<float>(32, 0.25f * float(i)), {4, 8});
      Tensor loss = (tanh(matmul(x, w)) * 0.5).sum();
      opt.zero_grad();
      loss.backward();
      opt.step();
      observe(loss);
      step->~Step();
    }
  };
  auto eager = terra::testing::run_in_mode(Mode::Eager, program, 3);
  auto co = terra::testing::run_in_mode(Mode::CoExecution, program, 3);
  EXPECT_EQ(eager.values, co.values);
  EXPECT_EQ(co.stats.fallbacks, 0) << "a step's locations changed with the caller's rbp";
  EXPECT_EQ(co.stats.traces, 1);
}
#endif
