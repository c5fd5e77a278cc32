# Sourced by scripts/test.sh and scripts/run_demo.sh: installs the Debian packages terra needs,
# only when one is missing (checked with dpkg -s), so reruns are fast.
TERRA_DEB_PACKAGES=(cmake ninja-build g++ libdnnl-dev libxbyak-dev libgtest-dev libgmock-dev libbenchmark-dev
                    pybind11-dev python3-dev python3-torch python3-numpy
                    python3-pip  # the pip-install check (brings setuptools and wheel)
                    ocl-icd-opencl-dev)  # dnnl-config.cmake needs OpenCL (only a Recommends of libdnnl-dev)

# terra_sudo PACKAGES...: prints the prefix apt-get needs ("" as root, "sudo" otherwise); fails with
# the command to run when neither works (a fresh Debian has no sudo unless it was installed).
terra_sudo() {
  if [ "$(id -u)" -eq 0 ]; then echo ""; return 0; fi
  if command -v sudo >/dev/null 2>&1; then echo "sudo"; return 0; fi
  echo "deps.sh: missing Debian packages: $*" >&2
  echo "deps.sh: run this script as root, or install them first: apt-get install $*" >&2
  return 1
}

terra_install_deps() {
  local missing=() p
  for p in "${TERRA_DEB_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing missing Debian packages: ${missing[*]}"
  local sudo
  sudo=$(terra_sudo "${missing[@]}") || return 1
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${TERRA_DEB_PACKAGES[@]}"
}

# The benchmarks' extras: OpenBLAS for the PyTorch baseline (Debian's torch otherwise runs on the
# reference BLAS), matplotlib for the charts, tqdm for the Python bench's progress and scikit-learn
# for the Python BERT-CLS program's F1 metric. OpenBLAS is used only by the torch runs, through
# LD_LIBRARY_PATH=$TERRA_OPENBLAS_DIR; the system's libblas.so.3 choice is left as it was.
TERRA_OPENBLAS_DIR=/usr/lib/x86_64-linux-gnu/openblas-pthread
terra_install_bench_deps() {
  local extra=() p a now sudo
  for p in libopenblas0-pthread python3-matplotlib python3-tqdm python3-sklearn; do
    dpkg -s "$p" >/dev/null 2>&1 || extra+=("$p")
  done
  if [ ${#extra[@]} -gt 0 ]; then
    echo "== installing ${extra[*]}"
    sudo=$(terra_sudo "${extra[@]}") || return 1
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
