// The compile layer's passes and their switches. Every pass can be turned off alone (the
// differential tests run with all on and with each off); default passes never change values.
// TERRA_PASSES_OFF=name[,name...] turns passes off for a process (read once, as libterra loads).
#pragma once
#include <atomic>
#include <string>

namespace terra::compile {

// SideBySide: the GraphRunner runs a heavy op on a spare core while it runs the ops after it that
// do not read it (runtime/runner_side.cpp); each op's own kernel, so values never change.
// JitElementwise: a fused float32 kernel runs as generated AVX2 code with its values in registers
// (backend/cpu/jit_elementwise.h) instead of the tile interpreter; the same bits either way.
enum class Pass : unsigned { FuseElementwise, SideBySide, JitElementwise, Count };

const char* pass_name(Pass p);
namespace detail {
extern std::atomic<unsigned> g_passes_off;  // bit p: pass p is off
}
// Inline: the GraphRunner asks for every block it runs (a block can be one op).
inline bool pass_enabled(Pass p) { return !(detail::g_passes_off.load(std::memory_order_relaxed) >> unsigned(p) & 1u); }
void set_pass_enabled(Pass p, bool on);  // process-wide; takes effect for blocks planned after it

}  // namespace terra::compile
