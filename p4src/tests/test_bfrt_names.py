"""The compiled program's BFRt names (bf-p4c's bfrt.json, per target)
against what the control plane and the packet suite use: every table,
action and register p4src/bfrt/setup_agq.py writes (BFRT_TABLES) and the
suite's Tofino adapter reads or clears (BFRT_REGISTERS, the C++ register
names) exists with the same key fields (exact match), action data fields and
sizes (p4src/agq/agq_limits.h); every PROTOCOL.md §9 agq counter is a
Counter of that name.

Run by ctest p4_bfrt_names_<target> after p4_compile_<target>. Standalone:
    python3 p4src/tests/test_bfrt_names.py BUILD/p4 [tofino|tofino2 ...]
(the targets given, default both; exit 77 = skipped: no compiler output)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "p4src" / "bfrt"))
import setup_agq as s  # noqa: E402

OUT = Path(os.environ.get("AGQ_P4_OUT", ROOT / "build" / "p4"))
BUILDS = {"tofino2": OUT / "agq-tofino2" / "bfrt.json", "tofino": OUT / "agq-tofino" / "bfrt.json"}
COUNTERS = ["agq_packets", "agq_contributions", "agq_first", "agq_resubmits", "agq_results", "agq_result_resent",
            "agq_absorbed", "agq_duplicate", "agq_fallback", "agq_fallback_data", "agq_ps_results", "agq_overflow",
            "agq_cas_retries", "drops_agq_malformed", "drops_agq_unknown_job", "drops_agq_bad_worker",
            "drops_agq_bad_slot", "drops_agq_bad_width", "parser_errors"]


def bfrt(target: str) -> dict[str, dict]:
    path = BUILDS[target]
    if not path.is_file():
        pytest.skip(f"{path}: not compiled (ctest -L p4 compiles it)")
    return {t["name"]: t for t in json.loads(path.read_text())["tables"]}


TARGETS = sorted(t for t in os.environ.get("AGQ_P4_TARGETS", " ".join(BUILDS)).split() if t in BUILDS)


@pytest.mark.parametrize("target", TARGETS)
def test_tables_keys_actions_and_data(target):
    tables = bfrt(target)
    lim = s.p4_limits()
    sizes = {"job_t": lim["AGQ_MAX_JOBS"], "worker_t": lim["AGQ_MAX_WORKERS"],
             "egress_worker_t": lim["AGQ_MAX_WORKERS"]}
    for table, (name, keys, actions) in s.BFRT_TABLES.items():
        assert name in tables, f"{target}: no table {name}"
        t = tables[name]
        got_keys = {k["name"]: k["match_type"] for k in t.get("key", [])}
        assert got_keys == {k: "Exact" for k in keys}, f"{target}: {name} keys {got_keys}"
        specs = {a["name"].rsplit(".", 1)[-1]: [d["name"] for d in a.get("data", [])]
                 for a in t.get("action_specs", [])}
        for action, fields in actions.items():
            assert action in specs, f"{target}: {name} has no action {action} ({sorted(specs)})"
            assert specs[action] == fields, f"{target}: {name}.{action} data {specs[action]} != {fields}"
        if table in sizes:
            assert t["size"] >= sizes[table], f"{target}: {name} size {t['size']} < {sizes[table]}"


@pytest.mark.parametrize("target", TARGETS)
def test_registers_have_the_cxx_names_and_sizes(target):
    tables = bfrt(target)
    lim = s.p4_limits()
    regs = s.bfrt_registers(target)
    assert len([k for k in regs if k.startswith("lane")]) == s.TARGETS[target]
    for cxx, name in regs.items():
        assert name in tables and tables[name]["table_type"] == "Register", f"{target}: no register {name} ({cxx})"
        t = tables[name]
        fields = [d["singleton"]["name"] for d in t["data"]]
        short = name[len("pipe."):]
        assert fields == [short + ".lo", short + ".hi"], f"{target}: {name} fields {fields}"
        want = lim["AGQ_SLOTS"] if cxx.startswith("slot_") else lim["AGQ_ROWS"]
        assert t["size"] == want, f"{target}: {name} size {t['size']} != {want}"
    # and nothing more: the Tofino 1 build has no lane16..lane31
    lanes = {n for n, t in tables.items() if t["table_type"] == "Register" and ".lanes.lane" in n}
    assert lanes == {v for k, v in regs.items() if k.startswith("lane")}


@pytest.mark.parametrize("target", TARGETS)
def test_protocol_counters(target):
    tables = bfrt(target)
    counters = {n.rsplit(".", 1)[-1]: t for n, t in tables.items() if t["table_type"] == "Counter"}
    for c in COUNTERS:
        assert c in counters, f"{target}: no Counter {c}"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.environ["AGQ_P4_OUT"] = sys.argv[1]
        OUT = Path(sys.argv[1])
        BUILDS = {"tofino2": OUT / "agq-tofino2" / "bfrt.json", "tofino": OUT / "agq-tofino" / "bfrt.json"}
    want = sys.argv[2:] or sorted(BUILDS)
    bad = [t for t in want if t not in BUILDS]
    if bad:
        sys.exit(f"usage: {sys.argv[0]} BUILD/p4 [tofino|tofino2 ...] (unknown target {bad[0]})")
    os.environ["AGQ_P4_TARGETS"] = " ".join(want)
    paths = [BUILDS[t] for t in want]
    if not any(p.is_file() for p in paths):
        print(f"SKIPPED: no bfrt.json under {OUT} for {', '.join(want)} (the P4 compilers are absent)")
        sys.exit(77)
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print("FAIL: missing " + ", ".join(missing))
        sys.exit(1)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
