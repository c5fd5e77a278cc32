#include "terra/core/wait.h"

#include <linux/membarrier.h>

namespace terra {

bool heavy_barrier_available() {
  // Registered once per process; a kernel or sandbox without it leaves producers on full fences.
  static const bool ok = [] {
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
  }();
  return ok;
}

bool heavy_barrier() { return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0; }

}  // namespace terra
