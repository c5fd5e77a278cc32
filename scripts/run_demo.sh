#!/usr/bin/env bash
# Builds terra (Release, build/) and runs the demo: examples/train_mlp.cpp, an MLP trained on
# generated data, one progress line per epoch. Extra arguments go to the demo (see its --help-less
# flags in examples/train_mlp.cpp: --epochs, --batch, --hidden, --steps-per-epoch, --lr, --seed).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
terra_install_deps

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTERRA_BUILD_EXAMPLES=ON >/dev/null
cmake --build build --target train_mlp

# libgomp workers wait passively instead of spinning: on 2 cores spinning threads fight each other.
export OMP_WAIT_POLICY=PASSIVE
exec ./build/train_mlp "$@"
