#!/usr/bin/env bash
# The main job. Builds terra (Release, build/), then shows the execution modes side by side:
#   1. the demo MLP (examples/train_mlp.cpp) trained in eager, lazy and co-execution mode — the
#      same program, one switch; the per-epoch losses are identical across modes;
#   2. terra-bench --quick: four of Terra's ten programs in every mode next to PyTorch eager
#      (scripts/bench_programs.sh --quick), with the table of steps/s, speedups, traces, fallbacks
#      and final losses. Under 5 minutes once built.
# Extra arguments go to the demo, e.g. `bash scripts/run_demo.sh --epochs 5 --batch 64`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
terra_install_deps

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTERRA_BUILD_EXAMPLES=ON >/dev/null
cmake --build build -j "${TERRA_JOBS:-2}" --target train_mlp terra-bench

for mode in eager lazy coexec; do
  echo
  ./build/train_mlp --mode "$mode" --epochs 3 "$@"
done
echo
TERRA_BENCH_BUILD=build TERRA_BENCH_SKIP_BUILD=1 bash scripts/bench_programs.sh --quick
