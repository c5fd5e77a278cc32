// How many threads terra's CPU kernels use: one process-wide decision that every kernel reads
// (terra's intra-op pool and the oneDNN calls it splits). See README "Threads".
#pragma once

namespace terra {

// Threads a kernel may use, the calling thread included. n < 1 throws std::invalid_argument.
// Takes effect at the next kernel; the pool resizes lazily.
void set_num_threads(int n);
// The current count. Until set_num_threads is called: OMP_NUM_THREADS when it holds a positive
// integer (its first entry), else the CPUs this process may run on (sched_getaffinity).
int num_threads();
// torch's name for num_threads().
inline int get_num_threads() { return num_threads(); }

}  // namespace terra
