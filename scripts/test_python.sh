#!/usr/bin/env bash
# Builds the Python binding (terra._terra, for Debian's /usr/bin/python3 3.11) into build/ and runs
# every Python suite (tests/python/test_*.py) with that interpreter: the torch conformance suite,
# the API tests, the bad-input table, runner errors, value checks, sizes.
# Usage: scripts/test_python.sh [build-dir]   (default: build/, the same folder scripts/test.sh uses)
# Exits non-zero if the build or any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PY=/usr/bin/python3
JOBS=${TERRA_JOBS:-2}

"$PY" -c "import numpy, torch" || { echo "test_python.sh: $PY needs numpy and torch (the oracle)"; exit 1; }
cmake -S . -B "$BUILD" -G Ninja -DTERRA_BUILD_PYTHON=ON -DTERRA_PYTHON_EXECUTABLE="$PY" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target terra_python

export PYTHONPATH="$(pwd)/$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
status=0
for suite in tests/python/test_*.py; do  # every suite, in name order
  echo "== $suite"
  (cd tests/python && "$PY" "$(basename "$suite")") || status=1
done
if [ "$status" -eq 0 ]; then echo "python suites: all passed"; else echo "python suites: FAILED"; fi
exit "$status"
