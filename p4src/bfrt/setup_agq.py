"""Install an agq-switch configuration (conf/*.toml, the same file agq-switch
reads) on a Tofino running p4src/agq/agq.p4.

Inside bfshell (SDE 9.13.x, Python 3.11 for tomllib):

    bfshell -b /path/to/agq-switch/p4src/bfrt/setup_agq.py
    # the config comes from $AGQ_CONFIG (default conf/agq.toml next to p4src/),
    # the port map from $AGQ_PORT_MAP: "0=132,1=140,2=148" (agq-switch port
    # id = DPDK port id -> Tofino dev_port); without it dev_port = port id;
    # $AGQ_TARGET = tofino2 (default, 32 lanes) or tofino (16-lane build:
    # every job must have lanes = 16).

The TOML -> entries translation is `entries_from_config()`, a pure function
(no bfrt), unit-tested in tests/pkt/test_bfrt_setup.py. It places jobs
exactly as agq-switch does (switch/pipeline/agq/jobs.cpp): rows and slots
first fit in configuration order, slots_per_row = 2^row_shift, guard bits,
w_min units (job_t's w_min = 4 * w_min_units bits: the narrowest min_width
a DATA of the job may carry, which admit_t checks), PRE group 0x1000 + job index, one
replica per worker with rid = worker_id.
"""
from __future__ import annotations

import ipaddress
import os
import random
import re
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11 (older SDEs)
    import tomli as tomllib  # type: ignore

KJOB_GROUP_BASE = 0x1000      # AgqProgram::kJobGroupBase
KMAX_ROW_SHIFT = 16           # tables.hpp kMaxRowShift
FLOOD_GROUP = 0xFFFF          # Forwarding::kFloodGroup
DEFAULT_TOTAL_ROWS = 4096     # AgqConfig
DEFAULT_TOTAL_SLOTS = 32768
LIMITS_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agq", "agq_limits.h")
TARGETS = {"tofino": 16, "tofino2": 32}   # target -> lanes per pass of its build (PROTOCOL.md §10)


def p4_limits(path: str = LIMITS_H) -> dict[str, int]:
    """The compiled table/register sizes (p4src/agq/agq_limits.h, the file the
    P4 program and the switch's config loader include): AGQ_ROWS, AGQ_SLOTS,
    AGQ_MAX_JOBS, AGQ_MAX_WORKERS."""
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*#define\s+(AGQ_\w+)\s+(\d+)\b", line)
            if m:
                out[m.group(1)] = int(m.group(2))
    for k in ("AGQ_ROWS", "AGQ_SLOTS", "AGQ_MAX_JOBS", "AGQ_MAX_WORKERS"):
        if k not in out:
            raise ValueError(f"{path}: no #define {k}")
    return out


# The BFRt objects of the compiled program (bf-p4c's bfrt.json names) this
# script writes and the packet suite's Tofino adapter reads. One map for both;
# tests/integration/test_bfrt_names.py checks every name, key and data field
# against the compiler's bfrt.json of each target.
#   table -> (bfrt.json name, {key field: entry dict key}, {action: [data fields]})
BFRT_TABLES = {
    "ipv4_host": ("pipe.AgqIngress.forwarding.ipv4_host", {"hdr.ipv4.dst_addr": "dst_addr"},
                  {"route": ["port"]}),
    "dmac": ("pipe.AgqIngress.forwarding.dmac", {"hdr.ethernet.dst_addr": "dst_addr"}, {"send": ["port"]}),
    "arp_proxy": ("pipe.AgqIngress.forwarding.arp_proxy", {"hdr.arp.tpa": "tpa"}, {"answer": ["mac"]}),
    "job_t": ("pipe.AgqIngress.job_lookup.job_t", {"hdr.agq.job_id": "job_id"},
              {"set_job": ["num_workers", "guard", "w_min", "max_units", "lanes", "slots", "slot_base", "row_base",
                           "row_shift", "deliver_ps", "ps_port", "ps_ipv4", "ps_mac", "mcast_grp"]}),
    "worker_t": ("pipe.AgqIngress.job_lookup.worker_t",
                 {"hdr.agq.job_id": "job_id", "hdr.agq.worker_id": "worker_id"},
                 {"set_worker": ["worker_bit", "port", "ipv4", "mac"]}),
    "egress_worker_t": ("pipe.AgqEgress.egress_rewrite.egress_worker_t",
                        {"hdr.agq.job_id": "job_id", "eg_intr_md.egress_rid": "egress_rid"},
                        {"set_worker": ["mac", "ipv4"]}),
    "epoch_t": ("pipe.AgqIngress.job_lookup.epoch_t", {}, {"set_epoch": ["epoch"]}),
}
# The C++ registers (switch/pipeline/agq/registers.hpp, dump names) -> bfrt.json
# register tables (paired: data fields <name>.lo = version 0, .hi = version 1).
BFRT_REGISTERS = {
    "slot_bitmap": "pipe.AgqIngress.bitmap_check.slot_bitmap",
    "slot_count": "pipe.AgqIngress.slot_counter.slot_count",
    "slot_window": "pipe.AgqIngress.slot_window_ctl.slot_window",
    "row_occupancy": "pipe.AgqIngress.row_occupancy_ctl.row_occupancy",
    **{f"lane{k:02d}": f"pipe.AgqIngress.lanes.lane{k:02d}.cells" for k in range(32)},
}


def bfrt_registers(target: str) -> dict[str, str]:
    """The registers of the `target` build: lane16..31 only on Tofino 2."""
    return {k: v for k, v in BFRT_REGISTERS.items()
            if not k.startswith("lane") or int(k[4:]) < TARGETS[target]}


def bfrt_node(bfrt, full_name: str):
    """bfrt_python object of a bfrt.json name ("pipe.AgqIngress.x.t")."""
    node = getattr(bfrt, "agq")
    for part in full_name.split("."):
        node = getattr(node, part)
    return node


def guard_bits(n: int) -> int:
    g = 0
    while (1 << g) < n:
        g += 1
    return g


def min_grant_units(g: int) -> int:
    return (g + 2 + 3) // 4


def capacity_warning(jid: int, n: int, slots: int, rows: int, max_width: int) -> str | None:
    """PROTOCOL.md §6, the text of agq-switch's job-add warning
    (switch/control/job_spec.cpp job_capacity_warning): rows that cannot hold
    the slots' windows at max_width, or "PS only" (None: every slot fits)."""
    g = guard_bits(n)
    w_min = 4 * min_grant_units(g)
    head = f"job {jid}: warning: "
    if max_width < w_min:
        return (head + f"PS only: max_width {max_width} bits is below w_min {w_min} bits (g = {g} guard bits for "
                f"{n} workers + 2 value bits): no window is ever granted, every sequence goes to the PS "
                f"(raise max_width to {w_min})")
    shift = 0
    while shift < KMAX_ROW_SHIFT and -(-slots // (1 << shift)) > rows:
        shift += 1
    per_row = min(1 << shift, slots)
    units = max_width // 4
    fit = 8 // units
    if per_row <= fit:
        return None
    k = 0
    while (2 << k) <= fit:
        k += 1
    need = -(-slots // (1 << k))
    return (head + f"{per_row} slots per row (2^{shift}, {slots} slots in {rows} rows) share 8 units per row half: "
            f"with windows of max_width {max_width} bits ({units} units) at most {fit} of a row's {per_row} slots "
            f"aggregate in the switch at once, the rest go to the PS (rows = {need} hold every slot at "
            f"{max_width} bits)")


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


def entries_from_config(cfg: dict, port_map: dict[int, int] | None = None, target: str = "tofino2",
                        limits: dict[str, int] | None = None) -> dict:
    """The table entries, PRE groups and port list for a parsed TOML config.

    Returns a dict of lists of plain dicts (field name -> int), one list per
    table/object: ports, ipv4_host, dmac, arp_proxy, job_t, worker_t,
    egress_worker_t, mcast_groups (group -> [(dev_port, rid)]), placements,
    and epoch (the switch's boot epoch: [switch] epoch, else random nonzero).
    Raises ValueError on what agq-switch would refuse and on what the compiled
    program for `target` ("tofino2": 32 lanes, "tofino": the 16-lane build)
    cannot hold (agq_limits.h).
    """
    pm = port_map or {}
    lim = limits or p4_limits()
    if target not in TARGETS:
        raise ValueError(f'target "{target}" is not one of {sorted(TARGETS)}')

    def dev(p: int) -> int:
        return pm.get(int(p), int(p))

    out = {k: [] for k in ("ports", "ipv4_host", "dmac", "arp_proxy", "job_t", "worker_t",
                           "egress_worker_t", "mcast_groups", "placements", "warnings")}
    ports: set[int] = set()
    epoch = int(cfg.get("switch", {}).get("epoch", 0)) or random.randint(1, 0xFFFF)
    if not 1 <= epoch <= 0xFFFF:
        raise ValueError(f"switch.epoch {epoch} is not 1..65535")
    out["epoch"] = epoch
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
    if total_rows > lim["AGQ_ROWS"]:
        raise ValueError(f"agq.total_rows: {total_rows} rows: the Tofino program's row registers hold "
                         f"{lim['AGQ_ROWS']} (p4src/agq/agq_limits.h AGQ_ROWS)")
    if total_slots > lim["AGQ_SLOTS"]:
        raise ValueError(f"agq.total_slots: {total_slots} slots: the Tofino program's slot registers hold "
                         f"{lim['AGQ_SLOTS']} (p4src/agq/agq_limits.h AGQ_SLOTS)")
    n_workers = 0
    used_rows: list[tuple[int, int]] = []
    used_slots: list[tuple[int, int]] = []
    seen_ids: set[int] = set()
    for index, job in enumerate(cfg.get("job", [])):
        jid, n = int(job["id"]), int(job["workers"])
        if jid in seen_ids:
            raise ValueError(f"duplicate job id {jid}")
        seen_ids.add(jid)
        if index >= lim["AGQ_MAX_JOBS"]:
            raise ValueError(f"job[{index}]: {len(cfg.get('job', []))} jobs: the Tofino program's job_t holds "
                             f"{lim['AGQ_MAX_JOBS']} (p4src/agq/agq_limits.h AGQ_MAX_JOBS)")
        workers = job.get("worker", [])
        if len(workers) != n:
            raise ValueError(f"job {jid}: {len(workers)} [[job.worker]] tables, but workers = {n}")
        n_workers += n
        if n_workers > lim["AGQ_MAX_WORKERS"]:
            raise ValueError(f"job[{index}].workers: {n_workers} workers in jobs 0..{index}: the Tofino program's "
                             f"worker_t holds {lim['AGQ_MAX_WORKERS']} (p4src/agq/agq_limits.h AGQ_MAX_WORKERS)")
        lanes = int(job.get("lanes", 32))
        if lanes not in (16, 32):
            raise ValueError(f"job {jid}: lanes = {lanes} is not 32 or 16 (the lane profiles)")
        if lanes > TARGETS[target]:
            raise ValueError(f"job {jid}: lanes = {lanes}, but the {target} build carries {TARGETS[target]} "
                             "lanes per pass (use lanes = 16: PROTOCOL.md §10)")
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
        warn = capacity_warning(jid, n, slots, rows_quota, max_width)
        if warn:
            out["warnings"].append(warn)
        out["placements"].append({"job_id": jid, "row_base": row_base, "rows": rows, "slot_base": slot_base,
                                  "slots": slots, "row_shift": shift, "mcast_grp": grp,
                                  "w_min_units": min_grant_units(g)})
        out["job_t"].append({
            "job_id": jid, "action": "set_job",
            "num_workers": n, "slots": slots, "slot_base": slot_base, "row_base": row_base,
            "row_shift": shift, "guard": g, "w_min": 4 * min_grant_units(g), "max_units": max_width // 4,
            "lanes": lanes,
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
    """Runs inside bfshell's bfrt_python (`bfrt` is its global). Every table
    is written through BFRT_TABLES (names checked against bfrt.json)."""
    for port in e["ports"]:
        bfrt.port.port.add(DEV_PORT=port, SPEED=speed, FEC=fec, PORT_ENABLE=True)
    for table in ("ipv4_host", "dmac", "arp_proxy", "job_t", "worker_t", "egress_worker_t"):
        name, keys, actions = BFRT_TABLES[table]
        node = bfrt_node(bfrt, name)
        for entry in e[table]:
            action = entry["action"]
            args = {k: entry[k] for k in keys.values()}
            args.update({f: entry[f] for f in actions[action]})
            getattr(node, "add_with_" + action)(**args)
    name, _, _ = BFRT_TABLES["epoch_t"]
    bfrt_node(bfrt, name).set_default_with_set_epoch(epoch=e["epoch"])
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
    target = os.environ.get("AGQ_TARGET", "tofino2")
    e = entries_from_config(load_config(path), parse_port_map(os.environ.get("AGQ_PORT_MAP")), target)
    for w in e["warnings"]:
        print(f"setup_agq: {path}: {w}", file=sys.stderr)
    install(globals()["bfrt"], e)
    print(f"setup_agq: {path} ({target}): {len(e['ports'])} ports, {len(e['job_t'])} jobs, "
          f"{len(e['worker_t'])} workers, {len(e['ipv4_host'])} routes installed, epoch {e['epoch']}")


if "bfrt" in globals():      # run by bfshell -b
    main_in_bfshell()
elif __name__ == "__main__":  # dry run anywhere: print the entries
    import json
    cfg_path = sys.argv[1] if len(sys.argv) > 1 else "conf/agq.toml"
    try:
        entries = entries_from_config(load_config(cfg_path), parse_port_map(os.environ.get("AGQ_PORT_MAP")),
                                      os.environ.get("AGQ_TARGET", "tofino2"))
    except ValueError as err:
        sys.exit(f"setup_agq: {cfg_path}: {err}")
    print(json.dumps(entries, indent=1))
