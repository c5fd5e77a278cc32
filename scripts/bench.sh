#!/usr/bin/env bash
# Builds Release with the benchmarks (build/, -DTERRA_BUILD_BENCH=ON), runs every benchmark with a
# fixed number of repetitions, side by side, and prints one summary table (bench/summarize.py).
# What each number means: docs/benchmarks.md. Takes about 3-5 minutes on the 2-core machine.
#
#   scripts/bench.sh                      # build/ , 3 repetitions
#   TERRA_BENCH_BUILD=build-x TERRA_BENCH_REPS=5 scripts/bench.sh
#   TERRA_BENCH_SKIP_BUILD=1 scripts/bench.sh   # reuse the binaries already built
#
# Threads: every run sets OMP_NUM_THREADS=t on its command line (t = 1, 2; dispatch at t=1 only):
# terra's default thread count (README "Threads"); the torch runs also call torch.set_num_threads(t).
# No OMP_WAIT_POLICY: terra's kernels never spin-wait, whatever it says.
# Raw results (Google Benchmark JSON + torch JSON) stay in $BUILD/bench-results/.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TERRA_BENCH_BUILD:-build}
REPS=${TERRA_BENCH_REPS:-3}
OUT="$BUILD/bench-results"
PY=/usr/bin/python3
start=$(date +%s)
stage() { echo "== $* ($(( $(date +%s) - start ))s)" >&2; }

source scripts/deps.sh
terra_install_deps
terra_install_bench_deps

if [[ -z "${TERRA_BENCH_SKIP_BUILD:-}" ]]; then
  stage "build ($BUILD, Release, TERRA_BUILD_BENCH=ON)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTERRA_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" -j "${TERRA_JOBS:-2}" --target dispatch_bench kernels_bench mlp_bench >&2
fi
rm -rf "$OUT"
mkdir -p "$OUT"

# gb NAME THREADS [extra benchmark flags]: one Google Benchmark binary, JSON into $OUT.
gb() {
  local name=$1 t=$2
  shift 2
  stage "$name OMP_NUM_THREADS=$t"
  OMP_NUM_THREADS=$t "$BUILD/$name" --benchmark_repetitions="$REPS" --benchmark_enable_random_interleaving=true \
    --benchmark_out="$OUT/${name}_t$t.json" --benchmark_out_format=json --benchmark_format=console \
    --benchmark_report_aggregates_only=true "$@" >&2
}
torch_run() {
  local t=$1
  shift
  stage "torch_mlp.py threads=$t"
  # torch on OpenBLAS (1 BLAS thread: its own pool would fight torch's threads for the 2 cores)
  OPENBLAS_NUM_THREADS=1 LD_LIBRARY_PATH=$TERRA_OPENBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  OMP_NUM_THREADS=$t "$PY" bench/torch_mlp.py --threads "$t" --reps "$(( REPS + 2 ))" "$@" >"$OUT/torch_mlp_t$t.json"
}

gb dispatch_bench 1 --benchmark_min_time=0.2
for t in 1 2; do
  gb kernels_bench "$t" --benchmark_min_time=0.1
  gb mlp_bench "$t"
  if [[ $t == 1 ]]; then torch_run "$t"; else torch_run "$t" --no-dispatch; fi
done
stage "done"
"$PY" bench/summarize.py "$OUT" "$REPS"
