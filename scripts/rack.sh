#!/usr/bin/env bash
# A rack in one box (tests/integration/rack.py): K hosts as network
# namespaces, each cabled by a veth to a kernel-facing DPDK port of
# agq-switch (net_af_xdp where it works, else net_af_packet), addresses,
# MACs, the switch's host table (MAC, route, ARP proxy per host), optionally
# a management network. Run as root, after building (build/ or AGQ_BUILD_DIR).
#
#   scripts/rack.sh up K [--mgmt] [--driver auto|af_xdp|af_packet] [--no-switch]
#                        [--dir DIR] [--switch-args "--job-listen 10.78.x.254:7600 ..."]
#   scripts/rack.sh down [TAG]     # one rack, or every agqr* rack of this machine
#   scripts/rack.sh list           # racks and their namespaces/links
#   scripts/rack.sh cleanup        # racks whose owning process died
#
# `up` prints, per host, its namespace (ip netns exec NS ...), kernel and agq
# addresses and the --vdev a DPDK process in it uses. The switch keeps
# running after `up` returns; `down` stops it and removes everything.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 tests/integration/rack.py "$@"
