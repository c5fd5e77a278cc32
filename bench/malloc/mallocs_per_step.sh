#!/usr/bin/env bash
# Heap allocations per training step, per thread, of one terra-bench program in one mode:
#   bench/malloc/mallocs_per_step.sh BUILD_DIR PROGRAM MODE [--quick]
# Runs the program twice under the malloc sampler (60 and 160 steps, no warm-up) and prints
# (calls of the 160-step run - calls of the 60-step run) / 100 per thread name: setup, tracing and
# graph generation cancel out, what remains is the steady state. The longer run's top call sites
# are left in /tmp/mallocs_PROGRAM_MODE.txt (mangled names: pipe through c++filt).
set -euo pipefail
build=$1 prog=$2 mode=$3 quick=${4:-}
lib="$build/libmalloc_sampler.so"
[ -f "$lib" ] || { echo "missing $lib (configure with -DTERRA_BUILD_BENCH=ON)" >&2; exit 2; }
for steps in 60 160; do
  MALLOC_SAMPLER_OUT="/tmp/mallocs_${prog}_${mode}.$steps.txt" LD_PRELOAD="$lib" \
    "$build/terra-bench" --child "$prog:$mode" --steps "$steps" --warmup 0 --repeat 1 $quick > /dev/null
done
mv "/tmp/mallocs_${prog}_${mode}.160.txt" "/tmp/mallocs_${prog}_${mode}.txt"
python3 - "/tmp/mallocs_${prog}_${mode}.60.txt" "/tmp/mallocs_${prog}_${mode}.txt" "$prog" "$mode" <<'PY'
import sys
def threads(path):
    out = {}
    for line in open(path):
        if line.startswith("thread "):
            _, name, count = line.split()
            out[name] = out.get(name, 0) + int(count)
    return out
a, b = threads(sys.argv[1]), threads(sys.argv[2])
cols = " ".join(f"{n}={(b.get(n, 0) - a.get(n, 0)) / 100:.0f}" for n in sorted(set(a) | set(b)))
print(f"{sys.argv[3]} {sys.argv[4]}: mallocs per step by thread: {cols}")
PY
rm -f "/tmp/mallocs_${prog}_${mode}.60.txt"
