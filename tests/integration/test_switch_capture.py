"""`agqctl capture` (issue 11): packets of a running agq-switch copied into
pcapng files by the switch itself (DPDK rte_pcapng, ethdev rx/tx callbacks),
with --no-huge and net_tap ports, two dataplane lcores. The test plays the
two workers of job 1 (conf/agq.toml) on the kernel side of the taps: their
DATA frames must appear in the capture of their port as received, byte for
byte, and the switch's RESULTs as transmitted, byte for byte as the worker
got them. Bad input leaves the switch and running captures untouched.
"""
import json
import subprocess
import time

import pytest
from scapy.utils import PcapNgReader

from agq_proto import AgqHeader
from harness import SOURCE_DIR, agqctl, binary, eal_args, unique_prefix, wait_for
from tap_switch import EPOCH, agq_in, data_frames, start_tap_switch


@pytest.fixture
def switch(tmp_path, procs):
    sw, sock, socks = start_tap_switch(tmp_path, procs, "aqc")
    try:
        yield sw, sock, socks
    finally:
        for s in socks:
            s.close()
        assert sw.stop() == 0, sw.output()


def ctl(sock, *words):
    return agqctl(sock, *words)


def ctl_ok(sock, *words):
    r = agqctl(sock, *words)
    assert r.returncode == 0, f"agqctl {' '.join(map(str, words))}: {r.stdout}{r.stderr}"
    return r.stdout


def pcapng_packets(path):
    """(None, bytes) per packet (scapy; tshark checks the directions)."""
    with PcapNgReader(str(path)) as r:
        return [(None, bytes(p)) for p in r]


def run_round(socks, slot, seq):
    sent = data_frames(slot, seq)
    for port, f in sent:
        socks[port].send(f)
        time.sleep(0.01)
    results = {port: agq_in(socks[port]) for port, _ in sent}
    return sent, results


def wait_ended(sock, port, timeout=5.0):
    def ended():
        rows = json.loads(ctl_ok(sock, "capture", "list", "--json"))
        row = next(r for r in rows if r["port"] == port)
        return row if row["state"] != "running" else None
    return wait_for(ended, timeout, what=f"capture of port {port} to end")


def test_capture_rx_tx_byte_for_byte(switch, tmp_path):
    sw, sock, socks = switch
    f1, f2 = tmp_path / "p1.pcapng", tmp_path / "p2.pcapng"
    ctl_ok(sock, "capture", "1", "both", f1)
    ctl_ok(sock, "capture", "2", "tx", f2, "--count", "1")
    sent, results = run_round(socks, slot=3, seq=77)
    assert len(results[1]) == 1 and len(results[2]) == 1, results
    # Port 2 stops by itself after one packet; port 1 on 'capture stop'.
    row2 = wait_ended(sock, 2)
    assert row2["written"] == 1 and row2["state"] == "ended: count reached" and row2["dropped"] == 0
    rows = json.loads(ctl_ok(sock, "capture", "list", "--json"))
    assert [r["state"] for r in rows if r["port"] == 1] == ["running"]
    ctl_ok(sock, "capture", "stop", "1")
    row1 = next(r for r in json.loads(ctl_ok(sock, "capture", "list", "--json")) if r["port"] == 1)
    assert row1["written"] == 2 and row1["dropped"] == 0 and row1["state"] == "ended: stopped"

    p1 = pcapng_packets(f1)
    assert [b for _, b in p1] == [sent[0][1], results[1][0]]  # its DATA in, its RESULT out
    p2 = pcapng_packets(f2)
    assert [b for _, b in p2] == [results[2][0]]
    r = AgqHeader.unpack(results[2][0][42:])
    assert (r.type, r.job_id, r.slot, r.seq, r.epoch) == (2, 1, 3, 77, EPOCH)
    # tshark reads the file too (and sees the direction of each packet).
    t = subprocess.run(["tshark", "-r", str(f1), "-T", "fields", "-e", "frame.len",
                        "-e", "frame.packet_flags_direction"], capture_output=True, text=True, timeout=60)
    assert t.returncode == 0, t.stderr
    assert [l.split("\t") for l in t.stdout.splitlines()] == [
        [str(len(sent[0][1])), "0x00000001"], [str(len(results[1][0])), "0x00000002"]]  # inbound, outbound
    # ... and with the project's dissector (tools/wireshark/agq.lua), the agq fields of both.
    t = subprocess.run(["tshark", "-X", f"lua_script:{SOURCE_DIR}/tools/wireshark/agq.lua", "-r", str(f1),
                        "-T", "fields", "-E", "occurrence=a", "-e", "agq.type", "-e", "agq.job_id", "-e", "agq.slot",
                        "-e", "agq.seq", "-e", "agq.worker_id", "-e", "agq.width", "-e", "agq.guard",
                        "-e", "agq.epoch", "-e", "agq.lane", "-e", "agq.min_width"], capture_output=True, text=True,
                       timeout=60)
    assert t.returncode == 0, t.stderr
    d, res = [l.split("\t") for l in t.stdout.splitlines()]
    # byte 13 of a DATA is its min_width (agq.min_width), of the RESULT the granted width
    assert d[:8] == ["1", "1", "3", "77", "0", "", "0", "0"] and d[9] == "16"
    assert res[:8] == ["2", "1", "3", "77", "0", str(r.width), "1", str(EPOCH)]
    assert res[8].split(",") == [f"0x{v:08x}" for v in r.lanes]


def test_capture_bad_input_leaves_switch_untouched(switch, tmp_path):
    sw, sock, socks = switch
    good = tmp_path / "good.pcapng"
    ctl_ok(sock, "capture", "1", "rx", good, "--snaplen", "64")
    cases = [
        (("capture", "9", "rx", tmp_path / "x.pcapng"), "port 9 does not exist (5 ports: 0..4)"),
        (("capture", "3", "rx", "/nonexistent-dir/x.pcapng"), "cannot write /nonexistent-dir/x.pcapng: No such file or directory"),
        (("capture", "1", "tx", tmp_path / "again.pcapng"), f"port 1 is already being captured to {good}"),
        (("capture", "3", "sideways", tmp_path / "x.pcapng"), "direction must be rx, tx or both"),
        (("capture", "3", "rx", tmp_path / "x.pcapng", "--count", "0"), "--count must be a positive number"),
        (("capture", "3", "rx", tmp_path / "x.pcapng", "--snaplen", "9"), "--snaplen must be 64..65535"),
        (("capture", "stop", "4"), "no capture running on port 4"),
    ]
    for words, msg in cases:
        r = ctl(sock, *words)
        assert r.returncode == 1 and msg in r.stderr, (words, r.stderr)
    assert not (tmp_path / "x.pcapng").exists() and not (tmp_path / "again.pcapng").exists()
    # Relative paths are made absolute by agqctl (the switch writes from its own cwd).
    rel = subprocess.run([str(binary("agqctl")), "--socket", str(sock), "capture", "3", "rx", "rel.pcapng"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert rel.returncode == 0, rel.stderr
    rows = {r["port"]: r for r in json.loads(ctl_ok(sock, "capture", "list", "--json"))}
    assert rows[3]["file"] == str(tmp_path / "rel.pcapng")
    # The first capture still works, snaplen applied: 64 bytes of each 190-byte DATA.
    sent, results = run_round(socks, slot=5, seq=78)
    assert results[1] and results[2], "the switch still aggregates"
    ctl_ok(sock, "capture", "stop")
    pk = pcapng_packets(good)
    assert [b for _, b in pk] == [sent[0][1][:64]]
    assert sw.alive()


def test_capture_ends_at_switch_exit(switch, tmp_path):
    sw, sock, socks = switch
    f = tmp_path / "exit.pcapng"
    ctl_ok(sock, "capture", "2", "both", f)
    sent, results = run_round(socks, slot=7, seq=79)
    assert sw.stop() == 0, sw.output()
    assert [b for _, b in pcapng_packets(f)] == [sent[1][1], results[2][0]]


def test_capture_on_pcap_and_null_ports_with_count(tmp_path, procs):
    """Other port kinds: a net_pcap replay port (infinite_rx, far faster
    than the writer: copies are dropped and counted, the lcore never
    waits) and a net_null sink, one lcore. --count ends each capture."""
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap
    from scapy.layers.inet import IP, UDP
    frames = [bytes(Ether(src=f"02:00:00:00:00:a{i}", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.2") /
                    UDP(sport=7, dport=9) / (bytes([i]) * 73)) for i in range(2)]
    wrpcap(str(tmp_path / "in.pcap"), [Ether(f) for f in frames])
    (tmp_path / "sw.toml").write_text('[switch]\npipeline = "classic"\n[classic]\nps_port = 1\nworker_ports = [0]\n'
                                      '[[mac]]\nmac = "02:00:00:00:00:02"\nport = 1\n')
    sock = tmp_path / "ctl.sock"
    vdevs = [f"net_pcap0,rx_pcap={tmp_path}/in.pcap,infinite_rx=1", "net_null0,no-rx=1"]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("capp"), "0", vdevs), "--",
                                "--config", tmp_path / "sw.toml", "--ctl-socket", sock])
    wait_for(lambda: sock.exists() or not sw.alive(), 30, what="control socket")
    ctl_ok(sock, "capture", "0", "rx", tmp_path / "rx.pcapng", "--count", "500")
    ctl_ok(sock, "capture", "1", "tx", tmp_path / "tx.pcapng", "--count", "300", "--snaplen", "100")
    rx, tx = wait_ended(sock, 0, 20), wait_ended(sock, 1, 20)
    assert rx["state"] == "ended: count reached" and rx["written"] == 500 and rx["seen"] >= 500, rx
    assert tx["state"] == "ended: count reached" and tx["written"] == 300, tx
    assert sw.alive()
    assert sw.stop() == 0, sw.output()
    got_rx = [b for _, b in pcapng_packets(tmp_path / "rx.pcapng")]
    got_tx = [b for _, b in pcapng_packets(tmp_path / "tx.pcapng")]
    assert len(got_rx) == 500 and set(got_rx) <= set(frames), set(got_rx) - set(frames)
    assert len(got_tx) == 300 and set(got_tx) <= {f[:100] for f in frames}
