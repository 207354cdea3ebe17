#!/usr/bin/env bash
# install-deps.sh - install the Debian packages omni needs, when missing.
#
# Idempotent and quiet when everything is present: it asks dpkg which of the
# packages below are not installed and only then runs apt-get. Later issues
# add their packages to PACKAGES. Runs as root (CI and the dev machines are
# root); otherwise it uses sudo when available.
set -euo pipefail

PACKAGES=(
  # Toolchain
  cmake ninja-build ccache g++
  # LLVM / MLIR 22 (Debian bookworm-security)
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  # Runtime libraries
  libabsl-dev libflatbuffers-dev flatbuffers-compiler
  libturbojpeg0-dev libopenblas-dev libpng-dev
  # Only for the comparisons of bench/MatmulBench.cpp and ConvBench.cpp
  # (optional: the build configures without them)
  libdnnl-dev libblis4-serial libblis4-pthread
  # Rewards computed by a server over HTTP (runtime/train/rewards/HttpReward)
  libcpp-httplib-dev nlohmann-json3-dev
  # omni.toml, the config file of omnigen and omnirun (runtime/base/ConfigFile)
  libtomlplusplus-dev
  # Linking generated kernels into shared objects
  lld-22
  # Collectives between processes: `mpirun -np N omnirun` (runtime/hal/mpi)
  openmpi-bin libopenmpi-dev
  # Tests (python3-pil: examples/reward-server, which the reward-server
  # test starts)
  libgtest-dev python3-pil
  # tools/format/check-format.sh (the formatting the repository is checked
  # against is clang-format 22's)
  clang-format-22
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them or run as root" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
