// oneDNN plumbing shared by the CPU kernels: one engine, a stream per thread, and a thread-safe
// cache of primitives keyed by (kind, shapes, attrs), since creating one costs tens of µs.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
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

// Runs `c` on this thread's stream, allocating its scratchpad; waits for completion.
void execute(const Cached& c, std::unordered_map<int, dnnl::memory> args);

// Wraps raw float data in a dnnl::memory (no copy).
dnnl::memory wrap(const dnnl::memory::desc& md, const void* data);

}  // namespace terra::cpu::onednn
