# Sourced by scripts/test.sh and scripts/run_demo.sh: installs the Debian packages terra needs,
# only when one is missing (checked with dpkg -s), so reruns are fast.
TERRA_DEB_PACKAGES=(cmake ninja-build g++ libdnnl-dev libgtest-dev libgmock-dev libbenchmark-dev
                    pybind11-dev python3-dev python3-torch python3-numpy)

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
