// Where an op call happened: the chain of return addresses of the frames inside the current step
// (C++), or a chain supplied by a language binding (Python: code object + instruction offset).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace terra::trace {

struct Location {
  uint64_t hash = 0;
  std::vector<uintptr_t> frames;  // innermost first
  bool operator==(const Location& o) const { return hash == o.hash && frames == o.frames; }
  std::string str() const;  // symbolized, for explain output
  // The program's own frames (outside libterra), demangled, innermost first, at most `max`; for a
  // binding's location, its frames as the describer names them (empty without one). Names a failed
  // op's call site.
  std::string user_str(int max = 3) const;
};

// Frame that bounds the walk: frames at or above it (the step's owner and its callers) are excluded.
void set_step_base(void* frame);
void* step_base();

// A binding's frames follow a 0 in `frames`, in pairs; a binding that can name them installs a
// describer: the text of one pair ("file.py:12 in f"), "" if unknown. Called from any thread.
using FrameDescriber = std::string (*)(uintptr_t a, uintptr_t b);
void set_frame_describer(FrameDescriber d);

// A binding installs its own capture (e.g. Python frames); null restores the C++ frame walk. Its
// matcher, if it has one, answers location_is for it (without one, location_is says false).
using LocationProvider = void (*)(Location& out);
using LocationMatcher = bool (*)(const Location& expected, int skip);
void set_location_provider(LocationProvider p, LocationMatcher m = nullptr);

// Captures the current location (frame-pointer walk; terra and code linked to terra::terra are
// compiled with -fno-omit-frame-pointer). The walk ends at the first word that is not a return
// address, so a program built without frame pointers is located up to its innermost frame.
void capture_location(Location& out);

// Whether capture_location, called from here, would capture exactly `expected`: a compare per
// frame, nothing copied or hashed. The co-executing host checks the call the graph predicts this
// way. Call it where capture_location would be called (the same frame depth). False when unsure:
// the caller then captures. With `skip` = 1 the innermost frame is not compared: its caller may
// call from another site of the function that captured (dispatch asks before it runs the call,
// Executor::known_outputs), as long as the frames above it are the same.
bool location_is(const Location& expected, int skip = 0);

}  // namespace terra::trace
