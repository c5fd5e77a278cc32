#!/usr/bin/env bash
# The full check CI runs (.ci/run): dependencies, Release build + all tests, the tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, then install and build/run the downstream
# find_package example against the installed copy. A failed build stops the script at once; failed
# test stages are collected so every stage runs, and the script exits non-zero if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
terra_install_deps

JOBS=${TERRA_JOBS:-2}
export OMP_WAIT_POLICY=PASSIVE
start=$(date +%s)
stage() { echo; echo "== $* ($(( $(date +%s) - start ))s)"; }
failed=()
check() {  # check NAME CMD...: runs a test stage, records a failure instead of stopping
  local name=$1; shift
  if ! "$@"; then failed+=("$name"); echo "!! $name FAILED"; fi
}

stage "Release build (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$JOBS"

stage "Release tests"
check "Release tests" bash -c 'cd build && ctest --output-on-failure -j2'

stage "Sanitizer build (build-asan/: ASan + UBSan)"
# -O1 (with asserts on): compiles much faster than -O3 and keeps sanitizer reports readable.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DTERRA_SANITIZE=ON \
  -DTERRA_BUILD_BENCH=OFF -DTERRA_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-asan -j "$JOBS" --target terra_tests

stage "Sanitizer tests"
check "Sanitizer tests" bash -c 'cd build-asan && UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j2'

# ---- Python tests hook (scripts/test_python.sh belongs to the Python binding) ------------------
if [ -f scripts/test_python.sh ] && [ -d tests/python ]; then
  stage "Python binding tests (scripts/test_python.sh, build/)"
  check "Python tests" bash scripts/test_python.sh build
fi
# ---- end of Python tests hook ------------------------------------------------------------------

stage "Install + downstream find_package example"
PREFIX=$(mktemp -d)
trap 'rm -rf "$PREFIX"' EXIT
cmake --install build --prefix "$PREFIX" >/dev/null
cmake -S examples/downstream -B "$PREFIX/downstream-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$PREFIX/downstream-build"
check "Downstream example" "$PREFIX/downstream-build/downstream"

if [ ${#failed[@]} -ne 0 ]; then
  stage "FAILED: ${failed[*]}"
  exit 1
fi
stage "all checks passed"
