# Sourced by scripts/test.sh and scripts/run_demo.sh: installs the Debian packages terra needs,
# only when one is missing (checked with dpkg -s), so reruns are fast.
TERRA_DEB_PACKAGES=(cmake ninja-build g++ libdnnl-dev libgtest-dev libgmock-dev libbenchmark-dev
                    pybind11-dev python3-dev python3-torch python3-numpy
                    ocl-icd-opencl-dev)  # dnnl-config.cmake needs OpenCL (only a Recommends of libdnnl-dev)

terra_install_deps() {
  local missing=() p
  for p in "${TERRA_DEB_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing missing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${TERRA_DEB_PACKAGES[@]}"
}

# The benchmarks' extras: OpenBLAS for the PyTorch baseline (Debian's torch otherwise runs on the
# reference BLAS) and matplotlib for the charts. OpenBLAS is used only by the torch runs, through
# LD_LIBRARY_PATH=$TERRA_OPENBLAS_DIR; the system's libblas.so.3 choice is left as it was.
TERRA_OPENBLAS_DIR=/usr/lib/x86_64-linux-gnu/openblas-pthread
terra_install_bench_deps() {
  local extra=() p a now sudo
  for p in libopenblas0-pthread python3-matplotlib; do
    dpkg -s "$p" >/dev/null 2>&1 || extra+=("$p")
  done
  if [ ${#extra[@]} -gt 0 ]; then
    echo "== installing ${extra[*]}"
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    local alts=(libblas.so.3-x86_64-linux-gnu liblapack.so.3-x86_64-linux-gnu)
    local -A before=()
    for a in "${alts[@]}"; do before[$a]=$(update-alternatives --query "$a" 2>/dev/null | sed -n 's/^Value: //p'); done
    $sudo apt-get update >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${extra[@]}" >/dev/null
    # Installing OpenBLAS makes it the system's libblas.so.3 (update-alternatives, priority 100). Put
    # the previous choice back: only the torch run below uses OpenBLAS, through LD_LIBRARY_PATH.
    for a in "${alts[@]}"; do
      now=$(update-alternatives --query "$a" 2>/dev/null | sed -n 's/^Value: //p')
      if [ -n "${before[$a]}" ] && [ "$now" != "${before[$a]}" ]; then
        $sudo update-alternatives --set "$a" "${before[$a]}" >/dev/null
      fi
    done
  fi
}
