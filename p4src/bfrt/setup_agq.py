"""Install an agq-switch configuration (conf/*.toml, the same file agq-switch
reads) on a Tofino running p4src/agq/agq.p4.

Inside bfshell (SDE 9.13.x, Python 3.11 for tomllib):

    bfshell -b /path/to/agq-switch/p4src/bfrt/setup_agq.py
    # the config comes from $AGQ_CONFIG (default conf/agq.toml next to p4src/),
    # the port map from $AGQ_PORT_MAP: "0=132,1=140,2=148" (agq-switch port
    # id = DPDK port id -> Tofino dev_port); without it dev_port = port id.

The TOML -> entries translation is `entries_from_config()`, a pure function
(no bfrt), unit-tested in tests/pkt/test_bfrt_setup.py. It places jobs
exactly as agq-switch does (switch/pipeline/agq/jobs.cpp): rows and slots
first fit in configuration order, slots_per_row = 2^row_shift, guard bits,
w_min units, PRE group 0x1000 + job index, one replica per worker with
rid = worker_id.
"""
from __future__ import annotations

import ipaddress
import os
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11 (older SDEs)
    import tomli as tomllib  # type: ignore

KJOB_GROUP_BASE = 0x1000      # AgqProgram::kJobGroupBase
KMAX_JOBS = 4096              # AgqProgram::kMaxJobs
KMAX_ROW_SHIFT = 16           # tables.hpp kMaxRowShift
FLOOD_GROUP = 0xFFFF          # Forwarding::kFloodGroup
DEFAULT_TOTAL_ROWS = 4096     # AgqConfig
DEFAULT_TOTAL_SLOTS = 32768


def guard_bits(n: int) -> int:
    g = 0
    while (1 << g) < n:
        g += 1
    return g


def min_grant_units(g: int) -> int:
    return (g + 2 + 3) // 4


def ip2int(s: str) -> int:
    return int(ipaddress.IPv4Address(s))


def mac2int(s: str) -> int:
    return int(s.replace(":", ""), 16)


def _first_fit(used: list[tuple[int, int]], need: int, capacity: int) -> int | None:
    at = 0
    for base, length in sorted(used):
        if base >= at and base - at >= need:
            return at
        at = max(at, base + length)
    return at if at <= capacity and capacity - at >= need else None


def entries_from_config(cfg: dict, port_map: dict[int, int] | None = None) -> dict:
    """The table entries, PRE groups and port list for a parsed TOML config.

    Returns a dict of lists of plain dicts (field name -> int), one list per
    table/object: ports, ipv4_host, dmac, arp_proxy, job_t, worker_t,
    egress_worker_t, mcast_groups (group -> [(dev_port, rid)]), placements.
    Raises ValueError on what agq-switch would refuse.
    """
    pm = port_map or {}

    def dev(p: int) -> int:
        return pm.get(int(p), int(p))

    out = {k: [] for k in ("ports", "ipv4_host", "dmac", "arp_proxy", "job_t", "worker_t",
                           "egress_worker_t", "mcast_groups", "placements")}
    ports: set[int] = set()
    pipeline = cfg.get("switch", {}).get("pipeline", "classic")
    if pipeline != "agq":
        raise ValueError(f'switch.pipeline is "{pipeline}": this script installs the agq program '
                         '(the classic pipeline is the published AGQ program; see p4src/README.md)')
    for r in cfg.get("route", []):
        out["ipv4_host"].append({"dst_addr": ip2int(r["ip"]), "action": "route", "port": dev(r["port"])})
        ports.add(dev(r["port"]))
    for m in cfg.get("mac", []):
        out["dmac"].append({"dst_addr": mac2int(m["mac"]), "action": "send", "port": dev(m["port"])})
        ports.add(dev(m["port"]))
    for a in cfg.get("arp_proxy", []):
        out["arp_proxy"].append({"tpa": ip2int(a["ip"]), "action": "answer", "mac": mac2int(a["mac"])})

    agq = cfg.get("agq", {})
    total_rows = int(agq.get("total_rows", DEFAULT_TOTAL_ROWS))
    total_slots = int(agq.get("total_slots", DEFAULT_TOTAL_SLOTS))
    used_rows: list[tuple[int, int]] = []
    used_slots: list[tuple[int, int]] = []
    seen_ids: set[int] = set()
    for index, job in enumerate(cfg.get("job", [])):
        jid, n = int(job["id"]), int(job["workers"])
        if jid in seen_ids:
            raise ValueError(f"duplicate job id {jid}")
        seen_ids.add(jid)
        if index >= KMAX_JOBS:
            raise ValueError("too many jobs")
        workers = job.get("worker", [])
        if len(workers) != n:
            raise ValueError(f"job {jid}: {len(workers)} [[job.worker]] tables, but workers = {n}")
        slots, rows_quota = int(job["slots"]), int(job["rows"])
        max_width = int(job.get("max_width", 32))
        delivery = job.get("delivery", "multicast")
        shift = 0
        while shift < KMAX_ROW_SHIFT and ((slots + (1 << shift) - 1) >> shift) > rows_quota:
            shift += 1
        rows = (slots + (1 << shift) - 1) >> shift
        row_base = _first_fit(used_rows, rows, total_rows)
        if row_base is None:
            raise ValueError(f"job {jid}: no space: {rows} free contiguous rows needed")
        slot_base = _first_fit(used_slots, slots, total_slots)
        if slot_base is None:
            raise ValueError(f"job {jid}: no space: {slots} free contiguous slots needed")
        used_rows.append((row_base, rows))
        used_slots.append((slot_base, slots))
        g = guard_bits(n)
        grp = KJOB_GROUP_BASE + index
        has_ps = "ps_port" in job
        if delivery == "ps" and not has_ps:
            raise ValueError(f"job {jid}: delivery = ps needs ps_port, ps_ip and ps_mac")
        out["placements"].append({"job_id": jid, "row_base": row_base, "rows": rows, "slot_base": slot_base,
                                  "slots": slots, "row_shift": shift, "mcast_grp": grp})
        out["job_t"].append({
            "job_id": jid, "action": "set_job",
            "num_workers": n, "slots": slots, "slot_base": slot_base, "row_base": row_base,
            "row_shift": shift, "guard": g, "w_min_units": min_grant_units(g), "max_units": max_width // 4,
            "mcast_grp": grp, "deliver_ps": 1 if delivery == "ps" else 0,
            "ps_port": dev(job["ps_port"]) if has_ps else 0,
            "ps_ipv4": ip2int(job["ps_ip"]) if has_ps else 0,
            "ps_mac": mac2int(job["ps_mac"]) if has_ps else 0,
        })
        if has_ps:
            ports.add(dev(job["ps_port"]))
        replicas = []
        for w in sorted(workers, key=lambda w: int(w["id"])):
            wid = int(w["id"])
            if not 0 <= wid < n:
                raise ValueError(f"job {jid}: worker id {wid} not in 0..{n - 1}")
            port = dev(w["port"])
            ports.add(port)
            common = {"job_id": jid, "worker_id": wid}
            out["worker_t"].append({**common, "action": "set_worker", "worker_bit": 1 << wid, "port": port,
                                    "ipv4": ip2int(w["ip"]), "mac": mac2int(w["mac"])})
            out["egress_worker_t"].append({"job_id": jid, "egress_rid": wid, "action": "set_worker",
                                           "mac": mac2int(w["mac"]), "ipv4": ip2int(w["ip"])})
            replicas.append((port, wid))
        out["mcast_groups"].append({"group": grp, "replicas": replicas})
    out["ports"] = sorted(ports)
    # Flood group: every port, pruned at the ingress port (level2_exclusion_id).
    out["mcast_groups"].append({"group": FLOOD_GROUP, "replicas": [(p, 0) for p in out["ports"]]})
    return out


def load_config(path: str) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


def parse_port_map(s: str | None) -> dict[int, int]:
    if not s:
        return {}
    return {int(a): int(b) for a, b in (kv.split("=") for kv in s.split(","))}


# ---------------------------------------------------------------- bfrt part
def install(bfrt, e: dict, speed: str = "BF_SPEED_100G", fec: str = "BF_FEC_TYP_RS") -> None:
    """Runs inside bfshell's bfrt_python (`bfrt` is its global)."""
    p4 = bfrt.agq.pipe
    ig, eg = p4.AgqIngress, p4.AgqEgress
    for port in e["ports"]:
        bfrt.port.port.add(DEV_PORT=port, SPEED=speed, FEC=fec, PORT_ENABLE=True)
    for r in e["ipv4_host"]:
        ig.forwarding.ipv4_host.add_with_route(dst_addr=r["dst_addr"], port=r["port"])
    for m in e["dmac"]:
        ig.forwarding.dmac.add_with_send(dst_addr=m["dst_addr"], port=m["port"])
    for a in e["arp_proxy"]:
        ig.forwarding.arp_proxy.add_with_answer(tpa=a["tpa"], mac=a["mac"])
    for j in e["job_t"]:
        args = {k: v for k, v in j.items() if k not in ("job_id", "action")}
        ig.job_lookup.job_t.add_with_set_job(job_id=j["job_id"], **args)
    for w in e["worker_t"]:
        ig.job_lookup.worker_t.add_with_set_worker(job_id=w["job_id"], worker_id=w["worker_id"],
                                               worker_bit=w["worker_bit"], port=w["port"],
                                               ipv4=w["ipv4"], mac=w["mac"])
    for w in e["egress_worker_t"]:
        eg.egress_rewrite.egress_worker_t.add_with_set_worker(job_id=w["job_id"], egress_rid=w["egress_rid"],
                                                               mac=w["mac"], ipv4=w["ipv4"])
    pre = bfrt.pre
    node_id = 1
    for g in e["mcast_groups"]:
        nodes = []
        for port, rid in g["replicas"]:
            pre.node.add(MULTICAST_NODE_ID=node_id, MULTICAST_RID=rid,
                         MULTICAST_LAG_ID=[], DEV_PORT=[port])
            nodes.append(node_id)
            node_id += 1
        pre.mgid.add(MGID=g["group"], MULTICAST_NODE_ID=nodes,
                     MULTICAST_NODE_L1_XID_VALID=[False] * len(nodes),
                     MULTICAST_NODE_L1_XID=[0] * len(nodes))
    # Prune a flood at its ingress port: L2 XID = the port (level2_exclusion_id).
    for port in e["ports"]:
        pre.prune.add(MULTICAST_L2_XID=port, DEV_PORT=[port])
    # Learning: smac digests -> static dmac entries (ageing by idle timeout is
    # left to the operator's bfrt session).
    bfrt.complete_operations()


def main_in_bfshell() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("AGQ_CONFIG", os.path.join(here, "..", "..", "conf", "agq.toml"))
    e = entries_from_config(load_config(path), parse_port_map(os.environ.get("AGQ_PORT_MAP")))
    install(globals()["bfrt"], e)
    print(f"setup_agq: {path}: {len(e['ports'])} ports, {len(e['job_t'])} jobs, "
          f"{len(e['worker_t'])} workers, {len(e['ipv4_host'])} routes installed")


if "bfrt" in globals():      # run by bfshell -b
    main_in_bfshell()
elif __name__ == "__main__":  # dry run anywhere: print the entries
    import json
    cfg_path = sys.argv[1] if len(sys.argv) > 1 else "conf/agq.toml"
    print(json.dumps(entries_from_config(load_config(cfg_path), parse_port_map(os.environ.get("AGQ_PORT_MAP"))),
                     indent=1))
