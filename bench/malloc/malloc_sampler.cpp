// LD_PRELOAD library that counts malloc calls per thread name and samples where they come from:
// every 16th call on a thread records a backtrace. At exit it writes MALLOC_SAMPLER_OUT (default
// /tmp/malloc_sampler.txt): "thread NAME COUNT" lines, then the top call sites (first frames
// outside libc/libstdc++, mangled; pipe through c++filt). bench/malloc/mallocs_per_step.sh turns
// two runs into mallocs per step. Counting only: it changes no allocation.
#include <execinfo.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>

extern "C" void* __libc_malloc(size_t);

namespace {

thread_local int t_in_hook = 0;
thread_local unsigned long t_calls = 0;

struct Site {
  void* pc[10];
  int n;
  char thread[16];
};
constexpr size_t kMaxSites = 2000000;
Site* g_sites = nullptr;
std::atomic<size_t> g_nsites{0};

std::mutex g_mu;
std::map<std::string, unsigned long>* g_per_thread = nullptr;

struct ThreadCount {  // flushed into g_per_thread when the thread exits (or at process exit)
  unsigned long n = 0;
  char name[16] = {0};
  ~ThreadCount() { flush(); }
  void flush() {
    // An atomic exchange: with a plain read and `n = 0`, g++ -O3 counted the main thread twice.
    const unsigned long v = __atomic_exchange_n(&n, 0ul, __ATOMIC_RELAXED);
    if (!v) return;
    t_in_hook = 1;
    {
      std::lock_guard<std::mutex> g(g_mu);
      if (!g_per_thread) g_per_thread = new std::map<std::string, unsigned long>;
      (*g_per_thread)[name] += v;
    }
    t_in_hook = 0;
  }
};
thread_local ThreadCount t_count;

}  // namespace

extern "C" void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  if (t_in_hook) return p;
  t_in_hook = 1;
  // The name is read again now and then: threads are named after they start.
  if (++t_count.n == 1 || (t_count.n & 1023) == 0) pthread_getname_np(pthread_self(), t_count.name, 16);
  if ((++t_calls & 15) == 0 && g_sites) {
    size_t i = g_nsites.fetch_add(1, std::memory_order_relaxed);
    if (i < kMaxSites) {
      Site& s = g_sites[i];
      s.n = backtrace(s.pc, 10);
      pthread_getname_np(pthread_self(), s.thread, 16);
    }
  }
  t_in_hook = 0;
  return p;
}

__attribute__((constructor)) static void sampler_init() {
  t_in_hook = 1;
  g_sites = static_cast<Site*>(__libc_malloc(sizeof(Site) * kMaxSites));
  t_in_hook = 0;
}

__attribute__((destructor)) static void sampler_report() {
  t_in_hook = 1;
  t_count.flush();
  t_in_hook = 1;
  const size_t n = std::min(g_nsites.load(), kMaxSites);
  std::map<std::string, long> by_site;
  for (size_t i = 0; i < n; ++i) {
    Site& s = g_sites[i];
    std::string key = std::string(s.thread) + " |";
    char** names = backtrace_symbols(s.pc, s.n);
    int kept = 0;
    for (int k = 1; k < s.n && kept < 4; ++k) {
      const char* f = names[k];
      if (std::strstr(f, "malloc_sampler") || std::strstr(f, "libstdc++") || std::strstr(f, "libc.so")) continue;
      const char* l = std::strchr(f, '(');
      const char* r = l ? std::strchr(l, '+') : nullptr;
      key += " " + ((l && r) ? std::string(l + 1, r) : std::string(f));
      kept++;
    }
    std::free(names);
    by_site[key]++;
  }
  std::multimap<long, std::string, std::greater<long>> top;
  for (auto& [k, v] : by_site) top.emplace(v, k);
  const char* path = std::getenv("MALLOC_SAMPLER_OUT");
  FILE* o = std::fopen(path ? path : "/tmp/malloc_sampler.txt", "w");
  if (!o) return;
  if (g_per_thread)
    for (auto& [name, count] : *g_per_thread) std::fprintf(o, "thread %s %lu\n", name.c_str(), count);
  std::fprintf(o, "sampled %zu calls (1 in 16); estimated calls per site:\n", n);
  int shown = 0;
  for (auto& [v, k] : top) {
    if (shown++ >= 80) break;
    std::fprintf(o, "%8ld %s\n", v * 16, k.c_str());
  }
  std::fclose(o);
}
