"""The switch's read-only job endpoint (agq-switch --job-listen,
docs/PROTOCOL.md §12) reached from inside a rack host over the rack's
management network: `job get ID --json` answers the control socket's
document; garbage, oversized, silent and state-changing requests get one
clear error line each and change nothing; the per-client request rate is
bounded. A PS started with its own flags next to a job whose ps_ip differs
stops with an error naming ps_ip instead of answering into the void; a
worker on its default address that gets no reply names the address it sent
with."""
import json
import re
import signal
import time

from harness import agqctl, wait_for
from rack import Rack, job_endpoint, leftovers
from test_rack_agq import agq_worker

PY = "/usr/bin/python3"
# Sends each request (hex; "" = connect and send nothing) on its own
# connection; prints one JSON list of the responses.
CLIENT = r"""
import json, socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
out = []
for req in sys.argv[3:]:
    s = socket.create_connection((host, port), timeout=10)
    t = time.monotonic()
    resp = b""
    try:
        s.sendall(b"x" * (1 << 20) if req == "huge" else bytes.fromhex(req))
    except (BrokenPipeError, ConnectionResetError):
        resp += b"<send failed>"
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            resp += b
    except ConnectionResetError:
        resp += b"<reset>"
    s.close()
    out.append([resp.decode(errors="replace"), round(time.monotonic() - t, 3)])
print(json.dumps(out))
"""
JOB = dict(workers=[0, 1], ps=2)


def ask(host, ip, port, *requests):
    r = host.run([PY, "-c", CLIENT, ip, port, *[q if isinstance(q, str) else q.hex() for q in requests]], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def state(ctl):
    return [agqctl(ctl, *c).stdout for c in (("job", "list"), ("route", "list"), ("arp", "list"), ("drop", "list"),
                                               ("mac", "list"))]


def test_job_endpoint_answers_job_get_and_refuses_everything_else(tmp_path):
    with Rack(3, tmp_path, mgmt=True) as rack:
        sw = rack.start_switch(jobs=rack.job_toml(1, **JOB), args=["--job-listen", f"{rack.mgmt_root_ip}:0"])
        ip, port = job_endpoint(sw)
        h = rack.hosts[0]
        want = agqctl(rack.ctl, "job", "get", "1", "--json")
        assert want.returncode == 0, want.stdout + want.stderr
        before = state(rack.ctl)

        (resp, _), (missing, _) = ask(h, ip, port, b"job get 1 --json\n", b"job get 7 --json\n")
        assert resp.startswith("ok\n"), resp
        assert json.loads(resp[3:]) == json.loads(want.stdout)
        assert missing == "error: no job 7\n", missing

        bad = [b"job add 2 workers=1 slots=4 rows=1 worker=0,0,10.9.9.9,02:00:00:00:09:09\n",
               b"job del 1\n", b"job reset 1\n", b"route add 10.77.0.99 1\n", b"arp del 10.77.0.1\n",
               b"drop 0 rx 1\n", b"clear ports\n", b"mac del 02:77:00:00:00:01\n", b"capture 0 rx /tmp/x.pcapng\n",
               b"counters\n", b"job get 1\n", b"job list --json\n"]
        for req, (resp, _) in zip(bad, ask(h, ip, port, *bad)):
            first = req.split()[0].decode()
            assert re.fullmatch(rf"error: '{first}( \S+)?' refused: this endpoint is read-only and answers only "
                                r"'job get ID --json' \(everything else: the switch's control socket\)\n", resp), (req, resp)

        garbage = [b"\x00\xff\xfe\x01garbage\n", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\n", b"job get -1 --json\n",
                   b"job get 99999999999999999999 --json\n"]
        # Another host from here on: 20 requests per client make a burst.
        h = rack.hosts[1]
        r = ask(h, ip, port, *garbage)
        assert r[0][0].startswith("error: not a request (bytes outside printable ASCII)"), r[0]
        assert r[1][0].startswith("error: 'GET /' refused"), r[1]
        assert r[2][0].startswith("error: empty request"), r[2]
        assert r[3][0].startswith("error: id: '-1' is not a job id"), r[3]
        assert r[4][0].startswith("error: id: '99999999999999999999' is not a job id"), r[4]

        (long_line, _), (huge, _), (silent, waited) = ask(h, ip, port, b"job get 1 --json" + b" " * 300 + b"\n",
                                                          "huge", b"")
        assert long_line == "error: request longer than 256 bytes\n", long_line
        assert huge.startswith("error: request longer than 256 bytes\n"), huge[:200]
        assert silent == "error: no complete request line within 2000 ms\n", silent
        assert 1.5 <= waited <= 5, waited

        assert state(rack.ctl) == before, "the endpoint changed the switch's state"
        assert sw.alive(), sw.output()
        tag = rack.tag
    assert leftovers(tag) == []


def test_job_endpoint_bounds_the_request_rate(tmp_path):
    with Rack(2, tmp_path, mgmt=True) as rack:
        sw = rack.start_switch(jobs=rack.job_toml(1, workers=[0, 1]),
                               args=["--job-listen", f"{rack.mgmt_root_ip}:0"])
        ip, port = job_endpoint(sw)
        # 60 requests back to back from one host: a burst of 20, then 10/s.
        t0 = time.monotonic()
        r = ask(rack.hosts[0], ip, port, *[b"job get 1 --json\n"] * 60)
        elapsed = time.monotonic() - t0  # an upper bound of the time the requests took
        ok = [x for x, _ in r if x.startswith("ok\n")]
        limited = [x for x, _ in r if x.startswith("error: rate limit")]
        assert len(ok) + len(limited) == 60, [x for x, _ in r if not x.startswith(("ok", "error: rate"))]
        assert 20 <= len(ok) <= 20 + 10 * elapsed + 2, (len(ok), elapsed)
        assert limited and limited[0] == "error: rate limit: at most 10 requests per second per client, retry later\n"
        # Another host has its own bucket.
        (other, _), = ask(rack.hosts[1], ip, port, b"job get 1 --json\n")
        assert other.startswith("ok\n"), other
        assert sw.alive()
        tag = rack.tag
    assert leftovers(tag) == []


def test_ps_with_its_own_flags_and_another_ps_ip_names_the_field(tmp_path):
    with Rack(3, tmp_path, mgmt=True) as rack:
        sw = rack.start_switch(jobs=rack.job_toml(1, delivery="ps", **JOB),
                               args=["--job-listen", f"{rack.mgmt_root_ip}:0"])
        ip, port = job_endpoint(sw)
        ctl = f"tcp:{ip}:{port}"
        # Its own flags, as a user would start it: the job's N and slots, its default address.
        ps = agq_worker(rack, rack.hosts[2], "ps", ["--role", "ps", "--job-id", "1", "--workers", "2", "--slots", "32"])
        wait_for(lambda: "ready" in ps.output() or not ps.alive(), 20, what="PS ready")
        ws = [agq_worker(rack, rack.hosts[i], f"w{i}", ["--switch-ctl", ctl, "--job", "1", "--ids", str(i),
                                                        "--elements", 3200, "--rounds", 1, "--reply-timeout", "20"],
                         lcore=str(i)) for i in (0, 1)]
        assert ps.wait(20) == 2, ps.output()[-2000:]
        ps_ip = rack.hosts[2].agq_ip
        assert (f"agq-worker: job 1: the switch sends this job's PS traffic to ps_ip = {ps_ip}, this PS is "
                f"10.128.1.254 (its default address: no --switch-ctl/--job-file)") in ps.output(), ps.output()
        for w in ws:
            w.stop(signal.SIGINT)
        # A worker with its own flags: its default address is not in the job's worker table.
        w = agq_worker(rack, rack.hosts[0], "own", ["--job-id", "1", "--workers", "2", "--slots", "32", "--ids", "0",
                                                     "--elements", 3200, "--rounds", 1, "--reply-timeout", "2"])
        assert w.wait(30) == 3, w.output()[-2000:]
        assert ("agq-worker: worker 0 sent as ip 10.128.1.1, mac 02:00:01:00:01:01 (its default address: no "
                "--switch-ctl/--job-file); a switch whose job 1 lists another ip, mac or port for worker 0 drops its "
                "DATA") in w.output(), w.output()[-2000:]
        tag = rack.tag
    assert leftovers(tag) == []
