#include "terra/trace/return_address.h"

#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

namespace terra::trace {
namespace {

struct Segment {
  uintptr_t lo, hi;
  bool readable;  // execute-only code cannot be checked for the call before an address
};

// Executable segments of the loaded objects, sorted; replaced (never freed: a walk on another thread
// may still read the old list) when an address misses and objects were loaded or unloaded since.
struct Segments {
  std::vector<Segment> list;
  unsigned long long adds = 0, subs = 0;
};
std::atomic<const Segments*> g_segments{nullptr};
std::mutex g_rebuild_mu;

// Load and unload counts of the dynamic linker: cheap (the first object's record only).
void loader_counts(unsigned long long& adds, unsigned long long& subs) {
  struct Counts {
    unsigned long long adds = 0, subs = 0;
  } c;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* data) -> int {
        auto* c = static_cast<Counts*>(data);
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
          c->adds = info->dlpi_adds;
          c->subs = info->dlpi_subs;
        }
        return 1;
      },
      &c);
  adds = c.adds;
  subs = c.subs;
}

const Segments* build_segments() {
  auto* s = new Segments;
  loader_counts(s->adds, s->subs);
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Segments*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
          s->list.push_back({lo, lo + ph.p_memsz, (ph.p_flags & PF_R) != 0});
        }
        return 0;
      },
      s);
  std::sort(s->list.begin(), s->list.end(), [](const Segment& a, const Segment& b) { return a.lo < b.lo; });
  return s;
}

const Segment* find(const Segments& s, uintptr_t a) {
  auto it = std::upper_bound(s.list.begin(), s.list.end(), a, [](uintptr_t v, const Segment& g) { return v < g.lo; });
  if (it == s.list.begin()) return nullptr;
  --it;
  return a < it->hi ? &*it : nullptr;
}

// The segment holding `a`, rebuilding the list once if objects were loaded or unloaded since it was
// made (a dlopen'ed extension's code).
const Segment* segment_of(uintptr_t a) {
  const Segments* s = g_segments.load(std::memory_order_acquire);
  if (s)
    if (const Segment* g = find(*s, a)) return g;
  std::lock_guard<std::mutex> g(g_rebuild_mu);
  s = g_segments.load(std::memory_order_acquire);
  if (s) {
    unsigned long long adds, subs;
    loader_counts(adds, subs);
    if (adds == s->adds && subs == s->subs) return nullptr;  // nothing new: not code
  }
  s = build_segments();
  g_segments.store(s, std::memory_order_release);
  return find(*s, a);
}

}  // namespace

std::atomic<uintptr_t> detail::g_seen[detail::kSeen];

// E8 rel32, or FF /2 with any ModRM/SIB/displacement form (call through a register or memory).
bool ends_with_call(const uint8_t* p, uintptr_t room) {
#if defined(__x86_64__)
  if (room >= 5 && p[-5] == 0xE8) return true;
  for (int k = 2; k <= 7 && uintptr_t(k) <= room; ++k) {
    if (p[-k] != 0xFF) continue;
    const uint8_t modrm = p[-k + 1];
    if (((modrm >> 3) & 7) != 2) continue;  // FF /2 is call; /4 jmp and the others are not
    const int mod = modrm >> 6, rm = modrm & 7;
    int len = 2;
    if (mod != 3) {
      if (rm == 4) {  // a SIB byte follows
        if (k < 3) continue;
        len += 1;
        if (mod == 0 && (p[-k + 2] & 7) == 5) len += 4;
      } else if (mod == 0 && rm == 5) {
        len += 4;  // rip-relative
      }
      if (mod == 1) len += 1;
      if (mod == 2) len += 4;
    }
    if (len == k) return true;
  }
  return false;
#else
  (void)p;
  (void)room;
  return true;
#endif
}

bool detail::is_return_address_slow(uintptr_t a) {
  if (a == 0) return false;
  const Segment* g = segment_of(a);
  if (!g || (g->readable && !ends_with_call(reinterpret_cast<const uint8_t*>(a), a - g->lo))) return false;
  // An empty entry of the set, else the second: a third address alike replaces only that one, so
  // the first two keep hitting.
  std::atomic<uintptr_t>* set = g_seen + seen_set(a);
  (set[0].load(std::memory_order_relaxed) == 0 ? set[0] : set[1]).store(a, std::memory_order_relaxed);
  return true;
}

}  // namespace terra::trace
