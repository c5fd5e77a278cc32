#include "terra/backend/cpu/dnnl_common.h"

#include <omp.h>

#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "terra/core/allocator.h"

namespace terra::cpu::onednn {
namespace {

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ size_t(v)) * 1099511628211ull;
    return h;
  }
};

// Shapes can vary step to step (detection models): bound the cache, dropping it wholesale.
constexpr size_t kMaxEntries = 4096;

struct Cache {
  std::mutex mu;
  std::unordered_map<Key, std::shared_ptr<const void>, KeyHash> map;
};
Cache& cache() {
  static Cache* c = new Cache;  // leaked: kernels may run during static destruction
  return *c;
}

}  // namespace

SerialOmp::SerialOmp() : prev_(omp_get_max_threads()) {
  if (prev_ != 1) omp_set_num_threads(1);
}
SerialOmp::~SerialOmp() {
  if (prev_ != 1) omp_set_num_threads(prev_);
}

dnnl::engine& engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

std::shared_ptr<const Cached> cached(const Key& key, const std::function<Cached()>& make) {
  return cached_as<Cached>(key, make);
}

std::shared_ptr<const void> cached_void(const Key& key, const std::function<std::shared_ptr<const void>()>& make) {
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.map.find(key);
    if (it != c.map.end()) return it->second;
  }
  // Created outside the lock: two threads may both build it; the first insert wins.
  SerialOmp serial;
  std::shared_ptr<const void> made = make();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.map.size() >= kMaxEntries) c.map.clear();
  auto [it, fresh] = c.map.emplace(key, made);
  return it->second;
}

size_t cache_size() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.map.size();
}

dnnl::memory::desc plain_f32(const dnnl::memory::dims& dims) {
  using tag = dnnl::memory::format_tag;
  static const tag tags[] = {tag::undef, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  if (dims.size() < 1 || dims.size() > 6) throw std::runtime_error("[onednn] internal: unsupported rank");
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tags[dims.size()]);
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

Scratch::Scratch(size_t bytes) : n_(aligned64(bytes)) {
  if (n_) p_ = static_cast<char*>(allocate(n_));  // 64-byte aligned (allocator.cpp)
}
Scratch::~Scratch() {
  if (p_) deallocate(p_, n_);
}

void execute(const Cached& c, std::initializer_list<Arg> args) {
  Scratch scratch(c.pd.scratchpad_desc().get_size());
  execute(c.prim, c.pd, args, scratch.data());
}

void execute(const dnnl::primitive& p, const dnnl::primitive_desc_base& pd, std::initializer_list<Arg> args,
             void* scratchpad) {
  constexpr size_t kMax = 8;
  if (args.size() + 1 > kMax) throw std::runtime_error("[onednn] internal: too many arguments");
  // Memory objects made for this call and destroyed after it, also when oneDNN reports an error.
  struct Mems {
    dnnl_exec_arg_t a[kMax];
    int n = 0;
    ~Mems() {
      for (int i = 0; i < n; ++i) dnnl_memory_destroy(a[i].memory);
    }
    void add(int id, const dnnl_memory_desc_t* md, const void* data) {
      dnnl_memory_t m = nullptr;
      dnnl::error::wrap_c_api(dnnl_memory_create(&m, md, engine().get(), const_cast<void*>(data)),
                              "could not create a memory object");
      a[n++] = {id, m};
    }
  } mems;
  for (const Arg& x : args) mems.add(x.id, &x.md.data, x.data);
  const dnnl_memory_desc_t* sd = dnnl_primitive_desc_query_md(pd.get(), dnnl_query_scratchpad_md, 0);
  if (sd && dnnl_memory_desc_get_size(sd) > 0) mems.add(DNNL_ARG_SCRATCHPAD, sd, scratchpad);
  SerialOmp serial;
  dnnl::stream& s = stream();
  dnnl::error::wrap_c_api(dnnl_primitive_execute(p.get(), s.get(), mems.n, mems.a), "could not execute a primitive");
  dnnl::error::wrap_c_api(dnnl_stream_wait(s.get()), "could not wait on a stream");
}

}  // namespace terra::cpu::onednn
