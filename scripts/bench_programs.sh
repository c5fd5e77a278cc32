#!/usr/bin/env bash
# Terra's ten evaluation programs in every mode (eager, lazy, coexec) side by side with PyTorch:
# installs what is missing, builds terra-bench (Release), runs bench/torch_programs.py and then
# terra-bench --torch, which prints the combined table and checks that every mode's losses equal
# eager's exactly. What the columns mean: docs/terra-bench.md.
#
#   scripts/bench_programs.sh --quick     # 4 programs, quick sizes, all modes + torch: < 5 min
#   scripts/bench_programs.sh             # all ten programs, default sizes (the docs' full table)
#   scripts/bench_programs.sh --programs gpt2,dcgan --steps 40 --warmup 10 --threads 1
#
# Options: --quick, --programs LIST|all, --modes LIST, --steps N, --warmup W, --seed S,
#          --repeat R (timed runs per row, median; default 3), --threads T (default: nproc),
#          --no-torch, --no-plots. Defaults: 60 steps, 15 warm-up; --quick: 40 steps, 10 warm-up.
# Environment: TERRA_BENCH_BUILD (build dir, default build), TERRA_BENCH_SKIP_BUILD=1 (reuse the
#              binary), TERRA_JOBS (build parallelism, default 2), TORCH_OPENBLAS_THREADS (default 1).
# Results: $BUILD/bench-programs/{terra.csv,torch.csv,plots/*.png,terra-bench.txt}.
# Exit status: terra-bench's (1 if a run failed or a mode's losses differ from eager's).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TERRA_BENCH_BUILD:-build}
OUT="$BUILD/bench-programs"
PY=/usr/bin/python3

QUICK=0 PROGRAMS="" MODES=eager,lazy,coexec STEPS="" WARMUP="" SEED=0 THREADS=$(nproc) TORCH=1 PLOTS=1 REPEAT=3
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --programs) PROGRAMS=$2; shift ;;
    --modes) MODES=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --seed) SEED=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --no-torch) TORCH=0 ;;
    --no-plots) PLOTS=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench_programs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [ "$QUICK" = 1 ]; then
  PROGRAMS=${PROGRAMS:-resnet,gpt2,dropblock,faster_rcnn}
  STEPS=${STEPS:-40}
  WARMUP=${WARMUP:-10}
else
  PROGRAMS=${PROGRAMS:-all}
  STEPS=${STEPS:-60}
  WARMUP=${WARMUP:-15}
fi
start=$(date +%s)
stage() { echo "== $* ($(( $(date +%s) - start ))s)" >&2; }

# ---- dependencies (apt, only when missing)
source scripts/deps.sh
terra_install_deps
terra_install_bench_deps
OPENBLAS_DIR=$TERRA_OPENBLAS_DIR

# ---- build
if [ -z "${TERRA_BENCH_SKIP_BUILD:-}" ]; then
  stage "build terra-bench ($BUILD, Release)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTERRA_BUILD_PROGRAMS=ON >/dev/null
  cmake --build "$BUILD" -j "${TERRA_JOBS:-2}" --target terra-bench >&2
fi
mkdir -p "$OUT"
rm -f "$OUT/terra.csv" "$OUT/torch.csv"

# ---- threads: the same count for torch (torch.set_num_threads) and terra (terra-bench --threads,
# i.e. terra::set_num_threads). No OMP_* variables: both run as a user would.
quick_flag=()
[ "$QUICK" = 1 ] && quick_flag=(--quick)

torch_flag=()
if [ "$TORCH" = 1 ]; then
  stage "PyTorch: bench/torch_programs.py (threads $THREADS, OpenBLAS via LD_LIBRARY_PATH=$OPENBLAS_DIR)"
  # OpenBLAS's pthread pool busy-waits after each call; with torch's own OpenMP pool on the same cores
  # that oversubscribes (gpt2: 18 vs 81 steps/s on 2 cores), so its BLAS calls run on one thread
  # (TORCH_OPENBLAS_THREADS to change); torch's intra-op threads are $THREADS like terra's.
  OPENBLAS_NUM_THREADS=${TORCH_OPENBLAS_THREADS:-1} \
  LD_LIBRARY_PATH=$OPENBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$PY" bench/torch_programs.py \
    --programs "$PROGRAMS" --steps "$STEPS" --warmup "$WARMUP" --seed "$SEED" --threads "$THREADS" --repeat "$REPEAT" \
    "${quick_flag[@]}" --csv "$OUT/torch.csv"
  torch_flag=(--torch "$OUT/torch.csv")
fi

plot_flag=()
[ "$PLOTS" = 1 ] && plot_flag=(--plots "$OUT/plots")
stage "terra-bench (threads $THREADS)"
set +e
"$BUILD/terra-bench" --programs "$PROGRAMS" --modes "$MODES" --steps "$STEPS" --warmup "$WARMUP" --seed "$SEED" \
  --threads "$THREADS" --repeat "$REPEAT" "${quick_flag[@]}" --csv "$OUT/terra.csv" "${torch_flag[@]}" "${plot_flag[@]}" | tee "$OUT/terra-bench.txt"
status=${PIPESTATUS[0]}
set -e
stage "done (exit $status); results in $OUT"
exit "$status"
