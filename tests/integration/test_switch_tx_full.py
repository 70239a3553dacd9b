"""A full tx ring drops and counts, and never blocks an lcore (issue 9).

agq-switch (classic pipeline, plain L2 forwarding) between two memif server
ports; bench_gen sends L2 frames into port 0 whose destination MAC is
statically on port 1, and never reads (--no-rx), so port 1's ring toward it
is full (memif: a receiver that never polls never hands the sender a free
slot). Every frame the switch received must then be accounted for exactly:
sent or counted as a tx drop, on the port it was meant for; and the switch
must keep answering its control socket while it drops.
"""
import json

from harness import agqctl, binary, counters, eal_args, memif_switch, memif_vdev, unique_prefix, wait_for



def test_full_tx_ring_drops_and_counts(procs, tmp_path):
    sw, ctl, socks = memif_switch(procs, tmp_path, "txf")
    # Rounds that received nothing are not busy (dp.busy_cycles).
    assert counters(ctl)["dp.busy_cycles"] == 0
    gen = procs.start("gen", [binary("bench_gen"),
                              *eal_args(unique_prefix("txg"), "1",
                                        [memif_vdev(i, socks[i], "client") for i in range(2)]),
                              "--", "--traffic", "l2", "--seconds", "1", "--warmup", "0", "--no-rx"])
    assert gen.wait(60) == 0, gen.output()
    sent = json.loads([l for l in gen.output().splitlines() if l.startswith("{")][-1])["tx_pkts"]
    assert sent > 0, gen.output()

    # The generator has exited: once dp.rx stops moving, the switch has read
    # what it will (frames still in the ring when the client closed it are
    # gone with the ring).
    last = [-1]

    def settled():
        now = counters(ctl)["dp.rx"]
        done, last[0] = now == last[0], now
        return done
    wait_for(settled, 20, interval=0.3, what="the switch's rx to settle")
    c = counters(ctl)
    assert sent // 2 <= c["dp.rx"] <= sent, (sent, c)
    assert c["dp.tx_dropped"] > 0, c
    # Exact accounting: each received frame was sent or dropped at tx (none
    # dropped by the program, none lost silently).
    assert c["dp.rx"] == c["dp.tx"] + c["dp.tx_dropped"], c
    assert c["dp.program_drops"] == 0 and c["dp.multiseg_drops"] == 0, c
    # bench_gen's l2 traffic is one flow: rx bursts of >= 8 frames took the
    # dataplane's fused path (one decision and one tx batch per run), whose
    # tx drops are counted like any other (how many bursts were that long
    # depends on how the two processes were scheduled).
    assert c["dp.run_packets"] > 0, c
    # Busy cycles: counted for the rounds that received frames, so at least
    # the TSC's ticks of one rx burst and at most the run's (a 1 s run:
    # < 4e9 ticks per received frame on any TSC below 4 GHz).
    assert 0 < c["dp.busy_cycles"] < 4e9 * 10, c
    assert c["dp.busy_cycles"] / c["dp.rx"] > 1, c
    ports = json.loads(agqctl(ctl, "ports", "--json").stdout)
    rows = ports["ports"] if isinstance(ports, dict) else ports
    by_id = {int(r["port"]): r for r in rows}
    assert by_id[1]["tx_dropped"] == c["dp.tx_dropped"], rows
    assert by_id[0]["tx_dropped"] == 0, rows
    # The lcore never blocked: the control socket answered throughout, and still does.
    assert agqctl(ctl, "counters").returncode == 0
    assert sw.alive(), sw.output()
    assert sw.stop() == 0, sw.output()
