"""bench_gen --linger keeps a memif peer connected after its report.

bench/run.py stops testpmd while the generator lingers: testpmd prints its
--record-core-cycles from port statistics that a memif peer leaving resets.
Here the device is agq-switch (classic pipeline, L2 forwarding between two
memif server ports): the generator's JSON report must appear while the
generator is still running, the switch's memif link must still be up then,
SIGINT must end the linger at once, and an un-interrupted linger must end by
itself.
"""
import json
import time

from harness import agqctl, binary, counters, eal_args, memif_switch, memif_vdev, unique_prefix, wait_for



def report(proc):
    lines = [l for l in proc.output().splitlines() if l.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def test_linger_keeps_the_link_until_sigint_or_timeout(procs, tmp_path):
    sw, ctl, socks = memif_switch(procs, tmp_path, "lgs")

    def gen(tag, linger):
        return procs.start(tag, [binary("bench_gen"),
                                 *eal_args(unique_prefix(tag), "1",
                                           [memif_vdev(i, socks[i], "client") for i in range(2)]),
                                 "--", "--traffic", "l2", "--seconds", "0.3", "--warmup", "0",
                                 "--rate-mpps", "0.5", "--linger", str(linger)])

    # A long linger: reported, still connected, ended by SIGINT.
    g = gen("lg1", 60)
    wait_for(lambda: report(g) is not None or not g.alive(), 60, what="the generator's report")
    r = report(g)
    assert r is not None and r["tx_pkts"] > 0, g.output()
    assert g.alive(), "the generator left before its linger: " + g.output()
    assert counters(ctl)["dp.rx"] > 0

    def links():
        out = json.loads(agqctl(ctl, "ports", "--json").stdout)
        rows = out["ports"] if isinstance(out, dict) else out
        return {int(p["port"]): p["link"] for p in rows}
    # Still connected half a second later: both memif links up.
    time.sleep(0.5)
    assert g.alive()
    assert links() == {0: "up", 1: "up"}, links()
    t0 = time.monotonic()
    assert g.stop() == 0, g.output()
    assert time.monotonic() - t0 < 5

    # A short linger ends by itself.
    g = gen("lg2", 0.5)
    t0 = time.monotonic()
    assert g.wait(60) == 0, g.output()
    assert report(g)["tx_pkts"] > 0, g.output()
    assert 0.8 <= time.monotonic() - t0 < 30  # 0.3 s sending + 0.5 s linger, plus start-up
    assert sw.alive(), sw.output()
    assert sw.stop() == 0, sw.output()
