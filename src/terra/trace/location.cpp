#include "terra/trace/location.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "terra/trace/frame_walk.h"

namespace terra::trace {
namespace {
thread_local void* t_base = nullptr;
LocationProvider g_provider = nullptr;
LocationMatcher g_matcher = nullptr;
std::atomic<FrameDescriber> g_describer{nullptr};

// A binding's pairs after index `i` (the 0), described, innermost first, at most `max`.
std::string binding_frames(const std::vector<uintptr_t>& frames, size_t i, int max) {
  FrameDescriber d = g_describer.load();
  if (!d) return "";
  std::string out;
  int shown = 0;
  for (++i; i + 1 < frames.size() && shown < max; i += 2) {
    std::string s = d(frames[i], frames[i + 1]);
    if (s.empty()) continue;
    out += (shown++ ? " <- " : "") + s;
  }
  return out;
}
constexpr int kMaxFrames = 64;
}  // namespace

void set_step_base(void* frame) { t_base = frame; }
void* step_base() { return t_base; }
void set_location_provider(LocationProvider p, LocationMatcher m) {
  g_provider = p;
  g_matcher = p ? m : nullptr;
}
void set_frame_describer(FrameDescriber d) { g_describer.store(d); }

__attribute__((noinline)) void capture_location(Location& out) {
  out.frames.clear();
  if (g_provider) {
    g_provider(out);
  } else {
    // Walk saved frame pointers up to the step's base frame. Each frame holds [saved fp, return address].
    // Start at the caller's frame: the executor calling us differs between tracing and
    // co-execution, everything above it (dispatch and the program) must compare equal.
    auto* fp = static_cast<uintptr_t*>(__builtin_frame_address(0));
    if (fp) fp = reinterpret_cast<uintptr_t*>(fp[0]);
    walk_frames(fp, static_cast<uintptr_t*>(t_base), kMaxFrames, out.frames, [](uintptr_t) { return false; });
  }
  // FNV-1a per word in two interleaved lanes: half the serial multiply chain of one lane (this runs
  // on every op call). Only compared within this process, never stored.
  uint64_t h0 = 1469598103934665603ull, h1 = 0x9e3779b97f4a7c15ull;
  const uintptr_t* f = out.frames.data();
  size_t n = out.frames.size(), i = 0;
  for (; i + 1 < n; i += 2) {
    h0 = (h0 ^ uint64_t(f[i])) * 1099511628211ull;
    h1 = (h1 ^ uint64_t(f[i + 1])) * 1099511628211ull;
  }
  if (i < n) h0 = (h0 ^ uint64_t(f[i])) * 1099511628211ull;
  out.hash = (h0 ^ (h1 >> 29) ^ (h1 << 35)) * 1099511628211ull ^ uint64_t(n);
}

__attribute__((noinline)) bool location_is(const Location& expected, int skip) {
  bool same;
  if (g_provider) {
    same = g_matcher && g_matcher(expected, skip);
  } else {  // capture_location's walk, from the same frame
    auto* fp = static_cast<uintptr_t*>(__builtin_frame_address(0));
    if (fp) fp = reinterpret_cast<uintptr_t*>(fp[0]);
    same = walk_matches(fp, static_cast<uintptr_t*>(t_base), kMaxFrames, expected.frames.data(), expected.frames.size(),
                        [](uintptr_t) { return false; }, size_t(skip)) == ptrdiff_t(expected.frames.size());
  }
  asm volatile("" ::: "memory");  // not a tail call: a matcher starts its walk from this frame
  return same;
}

std::string Location::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (frames[i] == 0) {  // a binding's frames follow
      std::string b = binding_frames(frames, i, 1 << 30);
      os << (i ? " <- " : "") << (b.empty() ? "<binding frames>" : b);
      break;
    }
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(frames[i]), &info) && info.dli_sname) {
      os << (i ? " <- " : "") << info.dli_sname << "+0x" << std::hex
         << (frames[i] - reinterpret_cast<uintptr_t>(info.dli_saddr)) << std::dec;
    } else if (info.dli_fname) {
      os << (i ? " <- " : "") << info.dli_fname << "@0x" << std::hex
         << (frames[i] - reinterpret_cast<uintptr_t>(info.dli_fbase)) << std::dec;
    } else {
      os << (i ? " <- " : "") << "0x" << std::hex << frames[i] << std::dec;
    }
  }
  return os.str();
}

std::string Location::user_str(int max) const {
  static Dl_info self{};
  static const bool have_self = dladdr(reinterpret_cast<void*>(&capture_location), &self) != 0;
  std::string out;
  int shown = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    uintptr_t f = frames[i];
    if (f == 0) return binding_frames(frames, i, max);  // a binding's frames follow
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(f), &info)) continue;
    if (have_self && info.dli_fbase == self.dli_fbase) continue;  // inside libterra
    std::string name;
    if (!info.dli_sname) {  // not exported: the object file and offset still locate it
      std::string file = info.dli_fname ? info.dli_fname : "?";
      char off[32];
      std::snprintf(off, sizeof off, "+0x%zx", size_t(f - reinterpret_cast<uintptr_t>(info.dli_fbase)));
      name = file.substr(file.rfind('/') + 1) + off;
    } else {
      name = info.dli_sname;
      int status = 0;
      if (char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status)) {
        name = d;
        std::free(d);
      }
      if (auto p = name.find('('); p != std::string::npos) name.resize(p);  // drop the parameter list
    }
    out += (shown ? " <- " : "") + name;
    if (++shown == max) break;
  }
  return out;
}

}  // namespace terra::trace
