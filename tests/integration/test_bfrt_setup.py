"""The Tofino set-up script's TOML -> entries translation (p4src/bfrt/
setup_agq.py, pure part; bfrt itself needs an SDE). Checks it on the shipped
conf/agq.toml and on placements computed by hand from the C++ rules
(switch/pipeline/agq/jobs.cpp): first fit, slots_per_row = 2^row_shift,
g = ceil(log2 N), w_min = ceil((g + 2) / 4), group 0x1000 + index, rid =
worker_id."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "p4src" / "bfrt"))

import setup_agq as s  # noqa: E402


def test_shipped_agq_conf():
    e = s.entries_from_config(s.load_config(str(ROOT / "conf" / "agq.toml")))
    j1, j2 = e["job_t"]
    assert (j1["job_id"], j1["slot_base"], j1["row_base"], j1["row_shift"]) == (1, 0, 0, 2)   # 64 slots / 16 rows
    assert (j2["job_id"], j2["slot_base"], j2["row_base"], j2["row_shift"]) == (2, 64, 16, 2)  # after job 1
    assert j1["guard"] == 1 and e["placements"][0]["w_min_units"] == 1 and j1["max_units"] == 8
    assert j1["lanes"] == 32 and 1 <= e["epoch"] <= 0xFFFF
    assert j2["max_units"] == 4
    assert j1["mcast_grp"] == 0x1000 and j2["mcast_grp"] == 0x1001
    assert j1["ps_ipv4"] == 0x0A020264 and j1["ps_mac"] == 0x020000000064
    w = {(x["job_id"], x["worker_id"]): x for x in e["worker_t"]}
    assert w[(1, 1)]["worker_bit"] == 2 and w[(1, 1)]["port"] == 2 and w[(1, 1)]["ipv4"] == 0x0A020202
    groups = {g["group"]: g["replicas"] for g in e["mcast_groups"]}
    assert groups[0x1000] == [(1, 0), (2, 1)] and groups[0x1001] == [(3, 0), (4, 1)]
    assert sorted(groups[0xFFFF]) == [(p, 0) for p in e["ports"]]
    assert [(x["job_id"], x["egress_rid"]) for x in e["egress_worker_t"]] == [(1, 0), (1, 1), (2, 0), (2, 1)]


def cfg(jobs, **agq):
    return {"switch": {"pipeline": "agq"}, "agq": agq, "job": jobs}


def job(jid, n, slots, rows, **kw):
    ws = [{"id": i, "port": 10 + i, "ip": f"10.0.{jid}.{i + 1}", "mac": f"02:00:00:00:{jid:02x}:{i + 1:02x}"}
          for i in range(n)]
    return {"id": jid, "workers": n, "slots": slots, "rows": rows, "worker": ws, **kw}


def test_row_shift_and_first_fit():
    e = s.entries_from_config(cfg([job(7, 5, 100, 7), job(8, 32, 8, 8), job(9, 1, 3, 1)]))
    a, b, c = e["placements"]
    # 100 slots in <= 7 rows: 2^4 = 16 per row -> 7 rows
    assert (a["row_shift"], a["rows"], a["row_base"], a["slot_base"]) == (4, 7, 0, 0)
    assert (b["row_shift"], b["rows"], b["row_base"], b["slot_base"]) == (0, 8, 7, 100)
    assert (c["row_shift"], c["rows"], c["row_base"], c["slot_base"]) == (2, 1, 15, 108)
    g = {j["job_id"]: (j["guard"], p["w_min_units"]) for j, p in zip(e["job_t"], e["placements"])}
    assert g == {7: (3, 2), 8: (5, 2), 9: (0, 1)}


def test_port_map_and_refusals():
    e = s.entries_from_config(cfg([job(1, 2, 4, 4, delivery="ps", ps_port=0, ps_ip="10.0.0.100",
                                       ps_mac="02:00:00:00:00:64")]), {0: 160, 10: 176, 11: 184})
    assert e["ports"] == [160, 176, 184]
    assert e["job_t"][0]["deliver_ps"] == 1 and e["job_t"][0]["ps_port"] == 160
    with pytest.raises(ValueError, match="no space"):
        s.entries_from_config(cfg([job(1, 2, 64, 64), job(2, 2, 64, 64)], total_rows=100))
    with pytest.raises(ValueError, match="needs ps_port"):
        s.entries_from_config(cfg([job(1, 2, 4, 4, delivery="ps")]))
    with pytest.raises(ValueError, match="classic"):
        s.entries_from_config({"switch": {"pipeline": "classic"}})


def test_entries_use_the_bfrt_names_of_their_table():
    """Every entry carries exactly the keys and the action data fields its
    BFRT_TABLES row names (what install() passes to bfrt_python)."""
    e = s.entries_from_config(s.load_config(str(ROOT / "conf" / "agq.toml")))
    for table in ("ipv4_host", "dmac", "arp_proxy", "job_t", "worker_t", "egress_worker_t"):
        _, keys, actions = s.BFRT_TABLES[table]
        for entry in e[table]:
            assert set(entry) == set(keys.values()) | {"action"} | set(actions[entry["action"]]), (table, entry)


def test_epoch_from_the_config():
    e = s.entries_from_config({"switch": {"pipeline": "agq", "epoch": 0x5EED}})
    assert e["epoch"] == 0x5EED
    with pytest.raises(ValueError, match="epoch"):
        s.entries_from_config({"switch": {"pipeline": "agq", "epoch": 0x10000}})


def test_lane_profile_per_target():
    e = s.entries_from_config(cfg([job(1, 2, 4, 4, lanes=16), job(2, 2, 4, 4)]))
    assert [j["lanes"] for j in e["job_t"]] == [16, 32]
    e = s.entries_from_config(cfg([job(1, 2, 4, 4, lanes=16)]), target="tofino")
    assert e["job_t"][0]["lanes"] == 16
    with pytest.raises(ValueError, match="the tofino build carries 16 lanes per pass"):
        s.entries_from_config(cfg([job(1, 2, 4, 4)]), target="tofino")
    with pytest.raises(ValueError, match="not 32 or 16"):
        s.entries_from_config(cfg([job(1, 2, 4, 4, lanes=8)]))


def test_limits_are_the_p4_sizes():
    """The sizes come from p4src/agq/agq_limits.h (the file the P4 and the
    switch's config loader include) and a config beyond them is refused."""
    lim = s.p4_limits()
    text = (ROOT / "p4src" / "agq" / "agq_limits.h").read_text()
    for k, v in lim.items():
        assert f"#define {k} {v}" in text
    with pytest.raises(ValueError, match=r"row registers hold %d \(p4src/agq/agq_limits.h AGQ_ROWS\)" % lim["AGQ_ROWS"]):
        s.entries_from_config(cfg([], total_rows=lim["AGQ_ROWS"] + 1))
    with pytest.raises(ValueError, match="slot registers hold %d" % lim["AGQ_SLOTS"]):
        s.entries_from_config(cfg([], total_slots=lim["AGQ_SLOTS"] + 1))
    small = dict(lim, AGQ_MAX_JOBS=2, AGQ_MAX_WORKERS=5)
    with pytest.raises(ValueError, match=r"job\[2\]: 3 jobs: the Tofino program's job_t holds 2"):
        s.entries_from_config(cfg([job(1, 1, 1, 1), job(2, 1, 1, 1), job(3, 1, 1, 1)]), limits=small)
    with pytest.raises(ValueError, match=r"job\[1\].workers: 6 workers in jobs 0..1: .*worker_t holds 5"):
        s.entries_from_config(cfg([job(1, 3, 1, 1), job(2, 3, 1, 1)]), limits=small)
    # The real sizes: one more 32-worker job than worker_t holds.
    n = lim["AGQ_MAX_WORKERS"] // 32 + 1
    jobs = [job(i % 200 + 1, 32, 1, 1) for i in range(n)]
    for i, j in enumerate(jobs):
        j["id"] = i + 1
    with pytest.raises(ValueError, match="worker_t holds %d" % lim["AGQ_MAX_WORKERS"]):
        s.entries_from_config(cfg(jobs, total_rows=lim["AGQ_ROWS"]))
