// oneDNN plumbing shared by the CPU kernels: one engine, a stream per thread, and a thread-safe
// cache of primitives keyed by (kind, shapes, attrs), since creating one costs tens of µs.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

namespace terra::cpu::onednn {

dnnl::engine& engine();
dnnl::stream& stream();  // thread_local: the host thread and the GraphRunner each get their own

// A created primitive with its descriptor (for scratchpad/workspace queries). Primitives are
// built with a user-managed scratchpad, so one cached primitive may run on two threads at once.
struct Cached {
  dnnl::primitive prim;
  dnnl::primitive_desc pd;
};

// Key: a primitive-kind tag followed by every int that determines the primitive.
using Key = std::vector<int64_t>;
// Creates under SerialOmp.
std::shared_ptr<const Cached> cached(const Key& key, const std::function<Cached()>& make);
// The same cache for a kernel's own bundle of primitives (one type per key tag: the tag says
// what the entry holds).
std::shared_ptr<const void> cached_void(const Key& key, const std::function<std::shared_ptr<const void>()>& make);
template <class T, class F>
std::shared_ptr<const T> cached_as(const Key& key, F&& make) {
  return std::static_pointer_cast<const T>(
      cached_void(key, [&]() -> std::shared_ptr<const void> { return std::make_shared<const T>(make()); }));
}
size_t cache_size();

// Plain row-major float32 memory descriptor.
dnnl::memory::desc plain_f32(const dnnl::memory::dims& dims);
// A primitive attr with user scratchpad mode.
dnnl::primitive_attr user_scratchpad_attr();

// oneDNN here runs on GNU OpenMP, whose idle team threads spin after every region. While alive,
// this limits the calling thread's OpenMP to one thread (a thread-local ICV, restored after), so
// oneDNN never starts a team: terra splits the heavy calls over its own pool instead. Every oneDNN
// call (primitive creation included: kernels pick blockings from the thread count) runs under it.
class SerialOmp {
 public:
  SerialOmp();
  ~SerialOmp();
  SerialOmp(const SerialOmp&) = delete;
  SerialOmp& operator=(const SerialOmp&) = delete;

 private:
  int prev_;
};

// One argument of an execution: the memory's descriptor and its data (not copied; the descriptor
// must outlive the call).
struct Arg {
  int id;  // DNNL_ARG_*
  const dnnl::memory::desc& md;
  const void* data;
};
// Runs `c` on this thread's stream, allocating its scratchpad; waits for completion.
void execute(const Cached& c, std::initializer_list<Arg> args);
// Runs `p` with a scratchpad the caller provides (64-byte aligned, at least
// pd.scratchpad_desc().get_size() bytes; may be null when that is 0); waits for completion.
// Through the C API: no argument map and no shared memory handle per call (oneDNN's own
// execution context still allocates).
void execute(const dnnl::primitive& p, const dnnl::primitive_desc_base& pd, std::initializer_list<Arg> args,
             void* scratchpad);

// Scratch bytes from terra's allocator (size classes reused step to step, no malloc per call).
class Scratch {
 public:
  explicit Scratch(size_t bytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* data() const { return p_; }

 private:
  char* p_ = nullptr;
  size_t n_ = 0;
};
// `bytes` rounded up to the 64-byte alignment scratch pieces are carved at.
inline size_t aligned64(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace terra::cpu::onednn
