#!/usr/bin/env bash
# The main job. Builds terra (Release, build/), then shows the execution modes side by side:
#   1. the demo MLP (examples/train_mlp.cpp) trained in eager, lazy and co-execution mode — the
#      same program, one switch; the per-epoch losses are identical across modes;
#   2. terra-bench --quick: four of Terra's ten programs in every mode next to PyTorch eager
#      (scripts/bench_programs.sh --quick), with the table of steps/s, speedups, traces, fallbacks
#      and final losses;
#   3. the same four programs written in Python on `import terra` (python/terra/programs/), through
#      the Python bench (`python3 -m terra.bench --quick`), next to their PyTorch versions.
#   Under 10 minutes once built.
# Extra arguments go to the demo, e.g. `bash scripts/run_demo.sh --epochs 5 --batch 64`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
terra_install_deps

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTERRA_BUILD_EXAMPLES=ON -DTERRA_BUILD_PYTHON=ON \
  -DTERRA_PYTHON_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build -j "${TERRA_JOBS:-2}" --target train_mlp terra-bench terra_python

for mode in eager lazy coexec; do
  echo
  ./build/train_mlp --mode "$mode" --epochs 3 "$@"
done
echo
TERRA_BENCH_BUILD=build TERRA_BENCH_SKIP_BUILD=1 bash scripts/bench_programs.sh --quick
echo
echo "== Terra's programs in Python (python3 -m terra.bench --quick)"
PYTHONPATH="$(pwd)/build/python" /usr/bin/python3 -m terra.bench --quick --programs resnet,gpt2,dropblock,faster_rcnn \
  --csv build/bench-programs/python.csv
