"""The agq-switch on net_tap ports with conf/agq.toml (PS on port 0, job 1
on ports 1-2, job 2 on ports 3-4), a fixed boot epoch, two lcores, and raw
AF_PACKET sockets on the kernel side of every tap; plus DATA frames of job
1's two workers. Shared by the capture and top tests."""
import select
import socket
import subprocess
import time
import uuid

from agq_proto import AGQ_PORT, DATA, AgqHeader, agq_frame, encode_value
from harness import SOURCE_DIR, binary, eal_args, unique_prefix, wait_for

N_PORTS = 5
WORKERS = [(1, "10.2.2.1", "02:00:00:00:01:01"), (2, "10.2.2.2", "02:00:00:00:01:02")]  # conf/agq.toml job 1
EPOCH = 0x5A5A
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def sh(*args, check=True):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, check=check)


def start_tap_switch(tmp_path, procs, tag):
    """(switch Proc, control socket, raw socket per port)."""
    uid = uuid.uuid4().hex[:6]
    ifaces = [f"{tag}{uid}{p}" for p in range(N_PORTS)]
    sock = tmp_path / "ctl.sock"
    cfg = tmp_path / "agq.toml"
    cfg.write_text((SOURCE_DIR / "conf/agq.toml").read_text().replace("\n[switch]\n", f"\n[switch]\nepoch = {EPOCH}\n", 1))
    vdevs = [f"net_tap{p},iface={ifaces[p]}" for p in range(N_PORTS)]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix(tag), "0,1", vdevs), "--",
                                "--config", cfg, "--ctl-socket", sock, "--idle-sleep-us", "50"])
    wait_for(lambda: sock.exists() or not sw.alive(), 30, what="control socket")
    assert sw.alive(), sw.output()
    socks = []
    for ifc in ifaces:  # no IPv6 chatter from the kernel into the switch
        sh("sysctl", "-qw", f"net.ipv6.conf.{ifc}.disable_ipv6=1", check=False)
        sh("ip", "link", "set", ifc, "up")
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((ifc, 0))
        s.setblocking(False)
        socks.append(s)
    time.sleep(0.3)
    return sw, sock, socks


def data_frames(slot, seq, v=0, req_width=16):
    """(port, frame) DATA of both workers of job 1 for one use of a slot (the second completes it)."""
    frames = []
    for i, (port, ip, mac) in enumerate(WORKERS):
        lanes = [encode_value((k * 7 + i) % 100 - 50, req_width, 2) for k in range(32)]
        h = AgqHeader(type=DATA, flags=v, job_id=1, worker_id=i, num_workers=2, slot=slot, seq=seq,
                      req_width=req_width, width=req_width, exponent=-5, lanes=lanes)  # min_width = R
        frames.append((port, agq_frame(h, mac, "02:00:00:00:00:fe", ip, "10.2.2.254", ip_id=i)))
    return frames


def agq_in(s, timeout=3.0):
    """Agq frames the switch sent to this socket's tap within `timeout`."""
    got, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not select.select([s], [], [], 0.05)[0]:
            if got:
                break
            continue
        frame, addr = s.recvfrom(4096)
        if addr[2] != PACKET_OUTGOING and len(frame) > 42 and frame[12:14] == b"\x08\x00" and frame[23] == 17 and \
                int.from_bytes(frame[36:38], "big") == AGQ_PORT:
            got.append(frame)
    return got
