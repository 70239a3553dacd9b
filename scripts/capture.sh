#!/bin/sh
# capture.sh: record what an agq-switch port sends and receives, to a pcap.
# Simpler for any port kind: `agqctl capture PORT rx|tx|both FILE.pcapng`
# (the switch writes it itself, see docs/OBSERVE.md). This script is for
# recording from the kernel side of a tap port.
#
#   scripts/capture.sh tap IFACE OUT.pcap [tcpdump filter...]
#       A net_tap / net_af_packet port: its kernel side is an ordinary
#       interface, so tcpdump sees both directions. Ctrl-C stops.
#   scripts/capture.sh pcap
#       Prints how to record a port with DPDK's pcap PMD instead (no process
#       attach needed).
#
# dpdk-pdump is NOT usable with agq-switch as the project runs it: pdump is a
# DPDK secondary process, and secondary processes need the primary's shared
# hugepage memory; agq-switch runs with --no-huge (or --in-memory), which has
# no shared memory for a secondary to map. Checked (DPDK 22.11, Debian):
# `dpdk-pdump --file-prefix <switch's prefix> -- --pdump 'port=0,...'` against
# a --no-huge agq-switch aborts in EAL init with "EAL: Failed to open shared
# memory!" / "EAL: FATAL: Cannot get hugepage information.". Use a tap port
# plus tcpdump, or a net_pcap port, or run the switch with hugepages if you
# really need pdump on a physical NIC.
set -eu

usage() { sed -n '2,20p' "$0"; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in
  tap)
    [ $# -ge 3 ] || usage
    iface=$2; out=$3; shift 3
    ip link show "$iface" >/dev/null 2>&1 || { echo "capture.sh: no interface $iface" >&2; exit 1; }
    ip link set "$iface" up
    exec tcpdump -i "$iface" -U -n -w "$out" "$@"
    ;;
  pcap)
    cat <<'TXT'
Record a port with the pcap PMD (both directions in separate files):
  --vdev=net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap   (replay in.pcap, record what the switch sends)
  --vdev=net_pcap1,iface=eth1                         (a kernel interface through libpcap)
Or give the switch a tap port and capture its kernel side:
  --vdev=net_tap0,iface=agq0   then   scripts/capture.sh tap agq0 port0.pcap
TXT
    ;;
  *) usage ;;
esac
