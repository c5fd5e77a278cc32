#!/usr/bin/env bash
# The full check CI runs (.ci/run): dependencies, Release build + all tests, the tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, the engine's tests under ThreadSanitizer, then install
# and build/run the downstream find_package example against the installed copy. A failed build stops
# the script at once; failed test stages are collected so every stage runs, and the script exits
# non-zero if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
terra_install_deps

JOBS=${TERRA_JOBS:-2}
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

stage "ThreadSanitizer build (build-tsan/, terra_tests only)"
# -O1 -g come with TERRA_SANITIZE_THREAD; asserts stay on.
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DTERRA_SANITIZE_THREAD=ON \
  -DTERRA_BUILD_BENCH=OFF -DTERRA_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan -j "$JOBS" --target terra_tests

# The engine's tests (every suite in tests/runtime, the ten programs in every mode, terra-bench) under
# TSan, with terra's intra-op pool at 2 threads (oneDNN runs single-threaded inside terra, so no
# uninstrumented libgomp team is involved). Reports go to files (children's too: the programs run in
# child processes); any file fails.
tsan_tests() {
  local logs suites filter rc=0 run=()
  logs=$(mktemp -d)
  suites=$(grep -ho '^TEST[_FP]*( *[A-Za-z0-9_]*' tests/runtime/*.cpp | sed 's/.*( *//' | sort -u)
  filter=$(for s in $suites; do printf '%s.*:*/%s.*:' "$s" "$s"; done)
  filter+='*ProgramTest.SameLossesInEveryMode/*:TerraBench.*:ThreadPool*.*:Threads.*:ParallelFor.*'
  filter+='-BoundedMemory.*:BadInputTable.*'  # thousands of single-threaded steps/cases: slow under TSan, nothing racy
  # gcc 12's TSan dies with "unexpected memory mapping" under high-entropy ASLR (vm.mmap_rnd_bits 32;
  # 28 works): run without ASLR where setarch may. 200 random programs: 1000 take minutes under TSan.
  if setarch "$(uname -m)" -R true 2>/dev/null; then run=(setarch "$(uname -m)" -R); fi
  TERRA_DIFF_PROGRAMS=200 \
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:suppressions=$PWD/tests/tsan.supp:log_path=$logs/tsan" \
    "${run[@]}" build-tsan/terra_tests --gtest_filter="$filter" || rc=$?
  if compgen -G "$logs/tsan*" >/dev/null; then
    cat "$logs"/tsan*
    echo "!! ThreadSanitizer reported the problems above"
    rc=1
  fi
  rm -rf "$logs"
  return $rc
}

stage "ThreadSanitizer tests (build-tsan/: tests/runtime, programs in every mode, terra-bench)"
check "ThreadSanitizer tests" tsan_tests

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
# The installed tool and module run from the prefix alone (RPATH, no LD_LIBRARY_PATH, not from build/).
if [ -x "$PREFIX/bin/terra-bench" ]; then
  check "Installed terra-bench" env -u LD_LIBRARY_PATH "$PREFIX/bin/terra-bench" --quick --programs resnet \
    --modes eager,coexec --steps 12 --warmup 2 --repeat 1 --csv "$PREFIX/terra-bench.csv"
fi
# The Python package, both routes of README.md's "Installing the Python package", each imported from
# another directory with nothing pointing at build/: the cmake --install copy, then `pip install .`
# into a venv, packaging the build/ folder this script already built (a fresh pip build would compile
# libterra a second time; the full pip route is checked by hand, see README.md).
pydir=$(compgen -G "$PREFIX/lib/python3*/dist-packages/terra" | head -1 || true)
if [ -n "$pydir" ]; then
  check "Installed Python module" bash -c 'cd "$1" && env -u LD_LIBRARY_PATH PYTHONPATH="$(dirname "$2")" \
    /usr/bin/python3 -c "import terra, sys; assert terra.__file__.startswith(sys.argv[1]), terra.__file__; \
print(terra.randn(2, 3) @ terra.ones(3))" "$2"' _ "$PREFIX" "$pydir"
  python_pip() {
    /usr/bin/python3 -m venv --system-site-packages --without-pip "$PREFIX/venv" &&
    TERRA_CMAKE_BUILD_DIR="$PWD/build" "$PREFIX/venv/bin/python" -m pip install -q --no-build-isolation \
      --no-index . &&
    (cd "$PREFIX" && env -u LD_LIBRARY_PATH -u PYTHONPATH "$PREFIX/venv/bin/python" -c \
      "import terra, sys; assert terra.__file__.startswith(sys.argv[1]), terra.__file__; print(terra.tensor([[1., 2.], [3., 4.]]))" \
      "$PREFIX/venv/")
  }
  check "pip install into a venv" python_pip
fi

if [ ${#failed[@]} -ne 0 ]; then
  stage "FAILED: ${failed[*]}"
  exit 1
fi
stage "all checks passed"
