// Whether a word read from a frame chain is a return address. The C++ location walk follows saved
// frame pointers; a program compiled without them (plain `g++ -O2`) leaves whatever it keeps in
// rbp there, and the walk would read stack words or heap pointers as "frames" that change from step
// to step — every op a new path, a fallback per step. The walk stops at the first word that is not
// the address right after a call instruction in loaded code.
#pragma once
#include <cstdint>

namespace terra::trace {

// True when `a` lies in an executable segment of a loaded object and (on x86-64) follows a call
// instruction. Validated addresses are cached, so a steady loop pays one load per frame.
bool is_return_address(uintptr_t a);

// x86-64: the `room` bytes ending at `end` (room may be less than 7 at a segment's start) end with a
// call instruction. Exposed for tests; always true on other architectures.
bool ends_with_call(const uint8_t* end, uintptr_t room);

}  // namespace terra::trace
