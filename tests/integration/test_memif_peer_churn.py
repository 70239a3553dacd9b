"""A memif peer that leaves while the switch is sending to it never crashes
the switch (pitfall P7, issue 9's "bad input and load").

DPDK 22.11's memif PMD unmaps a departed client's regions on the EAL
interrupt thread while an lcore may be inside rte_eth_tx_burst or rx_burst
on that port. Before the unmap guard (switch/dataplane/port_readers.hpp)
that crashed the switch in eth_memif_tx: in CI once, and here in 2 of about
20 runs of test_workers.py's two-lcore case. Here bench_gen floods port 0
with frames the switch sends to port 1 (static MAC) on both lcores, while
a second bench_gen connects to port 1, receives for a moment and leaves --
in turn orderly (it stops its port) and by SIGKILL -- again and again. The
switch must survive every exit and keep forwarding, and its counters must
show the guard at work: unmaps that waited for lcores caught mid-round,
none that gave up. (The crash itself is too rare to be this test's check:
the unguarded switch survived 80 such exits.)
"""
import json
import os
import signal
import time

from harness import binary, counters, eal_args, memif_switch, memif_vdev, unique_prefix, wait_for


CHURNS = int(os.environ.get("AGQ_CHURNS", "8"))  # AGQ_CHURNS=N for a longer stress


def test_switch_survives_peers_leaving_under_load(procs, tmp_path):
    sw, ctl, socks = memif_switch(procs, tmp_path, "chs", lcores="0,1", extra=["--memif-queues", "2"])
    # The flood: l2 frames to 02:00:00:00:00:02 (port 1), on both rings, so
    # both lcores transmit toward the churning peer.
    flood = procs.start("flood", [binary("bench_gen"),
                                  *eal_args(unique_prefix("chf"), "1", [memif_vdev(0, socks[0], "client")]),
                                  "--", "--traffic", "l2", "--seconds", "600", "--warmup", "0", "--queues", "2"])
    wait_for(lambda: counters(ctl).get("dp.rx", 0) > 0, 30, what="the flood to reach the switch")

    tx_seen = 0
    for i in range(CHURNS):
        peer = procs.start(f"peer{i}", [binary("bench_gen"),
                                        *eal_args(unique_prefix(f"chp{i}"), "1",
                                                  [memif_vdev(0, socks[1], "client")]),
                                        "--", "--traffic", "l2", "--seconds", "0.3", "--warmup", "0",
                                        "--rate-mpps", "0.001", "--queues", "2"])
        if i % 2:
            # Abrupt: killed while the switch is filling its rings.
            before = counters(ctl)["dp.tx"]
            wait_for(lambda: counters(ctl)["dp.tx"] > before + 1000 or not peer.alive(), 30,
                     what=f"the switch to send to peer {i}")
            peer.popen.send_signal(signal.SIGKILL)
            peer.popen.wait(30)
        else:
            # Orderly: bench_gen stops its port at exit (memif DISCONNECT).
            assert peer.wait(60) == 0, peer.output()
            rx = json.loads([l for l in peer.output().splitlines() if l.startswith("{")][-1])["rx_pkts"]
            assert rx > 0, peer.output()  # the switch was sending to it when it left
        time.sleep(0.05)
        assert sw.alive(), f"agq-switch died after peer {i} left:\n{sw.output()[-3000:]}"
        tx_seen = counters(ctl)["dp.tx"]

    assert flood.alive(), flood.output()
    c = counters(ctl)
    assert c["dp.tx"] >= tx_seen > 0, c
    # Every frame the switch took in left or was counted where it was lost.
    assert c["dp.multiseg_drops"] == 0, c
    # The guard is live in this binary: peers' regions were unmapped while
    # lcores were mid-round, and every such unmap waited for them, in time.
    assert c["dp.unmap_waits"] > 0 and c["dp.unmap_wait_timeouts"] == 0, c
    assert sw.alive(), sw.output()
    assert sw.stop() == 0, sw.output()
