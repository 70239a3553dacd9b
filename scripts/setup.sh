#!/usr/bin/env bash
# Installs every Debian package agq-switch needs to build, test, run the demo
# and run the benchmarks. Idempotent; run as root on Debian 12 (bookworm).
set -euo pipefail

PKGS=(
  build-essential g++ cmake ninja-build pkg-config
  libdpdk-dev dpdk dpdk-dev libnuma-dev libbsd-dev libcli11-dev libtomlplusplus-dev
  nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-scapy python3-pytest python3-numpy python3-matplotlib openmpi-bin libopenmpi-dev
  valgrind                     # bench/run.py --only instr: instructions per packet (callgrind)
  tcpdump tshark tmux iproute2 procps iputils-ping arping
  pybind11-dev python3-torch   # libagq's Python module and the DDP hook (workers/python, tests/torch)
  clang libclang-rt-14-dev     # libFuzzer target (scripts/fuzz.sh)
  clang-format python3-flake8  # scripts/format.sh; the lint ctests (tests/lint)
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root to install packages (missing: ${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all packages present"
