#!/usr/bin/env python3
"""Compile p4src/agq for one Tofino target with the open-source compilers
(../shared/tools/p4c: p4test and bf-p4c) and check the result: exit 0 when
p4test and bf-p4c accept the program without an error and the stages stay
within the budget; 1 on an error or a stage count above the budget; 77
(ctest SKIP_RETURN_CODE) when the tools are not there.

    p4_compile.py --tools DIR --target tofino2 --out build/p4/agq-t2 \\
                  --max-ingress-stages 16 --max-egress-stages 4 [--summary FILE]

Prints one summary line per target (stages, SALUs, compile time) and writes
OUT/summary.json: what docs/PIPELINE.md quotes (bf-p4c -g: OUT/pipe/logs/
resources.json, the .bfa's `stage N ingress:` lines)."""
from __future__ import annotations

import argparse
import json
import os
import re
import fcntl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKIP = 77
SRC = Path(__file__).resolve().parents[1] / "agq"
TARGETS = {"tofino": ("tna", 1), "tofino2": ("t2na", 2)}
# Per-target bf-p4c flags. Tofino 2: no CLOTs — with them bf-p4c 9.13.4
# writes an egress deparser whose CLOTs have no length or tag and the
# assembler stops ("No length for clot 3"; docs/PIPELINE.md).
EXTRA_FLAGS = {"tofino": [], "tofino2": ["--no-clot"]}


def tool_bin(tools: Path) -> Path | None:
    unpack = tools / "unpack"
    if not unpack.is_file():
        return None
    # One unpack at a time: ctest -j runs the targets' tests side by side,
    # and on a machine where the cache folder is new, a second unpack
    # replaces the folder the first one's compiler is running from (seen
    # as p4_compile_tofino2 failing after 5 s on a fresh machine).
    with open(Path(tempfile.gettempdir()) / "agq-p4tools-unpack.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = subprocess.run([str(unpack)], capture_output=True, text=True, check=True).stdout.strip()
    return Path(out.splitlines()[-1])


def errors_in(text: str) -> list[str]:
    # bf-p4c / p4test report "file(line): [--Werror=...] error: ..." or "error: ..."
    return [l for l in text.splitlines() if re.search(r"\berror\b", l) and "warning" not in l
            and not re.match(r"\s*0 errors?,", l)]


def stages_of(bfa: Path) -> dict[str, int]:
    used: dict[str, set[int]] = {"ingress": set(), "egress": set()}
    for m in re.finditer(r"^\s*stage (\d+) (ingress|egress):", bfa.read_text(), re.M):
        used[m.group(2)].add(int(m.group(1)))
    return {g: (max(s) + 1 if s else 0) for g, s in used.items()}


def placement_of(bfa: Path) -> dict:
    """gress -> stage -> the logical tables bf-p4c placed there (match
    tables, gateways, the compiler's tbl_* for statements outside tables;
    "+salu" when the table runs a stateful ALU), read from the .bfa's
    `stage N ingress:` sections."""
    out: dict[str, dict[int, list[str]]] = {"ingress": {}, "egress": {}}
    gress, stage, cur = None, None, None
    for line in bfa.read_text().splitlines():
        m = re.match(r"^stage (\d+) (ingress|egress):", line)
        if m:
            stage, gress = int(m.group(1)), m.group(2)
            continue
        if gress is None:
            continue
        m = re.match(r"^  (exact_match|ternary_match|gateway|hash_action|phase0_match) ([^ :]+)", line)
        if m:
            cur = m.group(2)
            out[gress].setdefault(stage, []).append(cur)
        elif cur and re.match(r"^    stateful: ", line):
            out[gress][stage][-1] = cur + " +salu"
        elif re.match(r"^\S", line):
            gress = None
    return {g: dict(sorted(st.items())) for g, st in out.items()}


def resources_of(res: Path, phv: Path) -> dict:
    """Per physical stage (ingress and egress share a stage's resources):
    logical tables, gateways, SRAM / TCAM / map RAM blocks, stateful ALUs
    (meter_alus), stats ALUs, from bf-p4c's resources.json; PHV containers
    used per gress and width, from phv.json."""
    out: dict = {"stages": [], "phv": {}}
    if res.is_file():
        mau = json.loads(res.read_text()).get("resources", {}).get("mau", {})
        for st in mau.get("mau_stages", []):
            out["stages"].append({
                "stage": st.get("stage_number"),
                "logical_tables": len(st.get("logical_tables", {}).get("ids", [])),
                "gateways": len(st.get("gateways", {}).get("gateways", [])),
                "sram": len(st.get("rams", {}).get("srams", [])),
                "tcam": len(st.get("tcams", {}).get("tcams", [])),
                "map_ram": len(st.get("map_rams", {}).get("maprams", [])),
                "salu": len(st.get("meter_alus", {}).get("meters", [])),
                "stats_alu": len(st.get("statistic_alus", {}).get("stats", [])),
            })
    if phv.is_file():
        used: dict[str, int] = {}
        for c in json.loads(phv.read_text()).get("containers", []):
            key = f"{c.get('gress', '?')} {c.get('bit_width')}b"
            used[key] = used.get(key, 0) + 1
        out["phv"] = dict(sorted(used.items()))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tools", required=True, type=Path)
    ap.add_argument("--target", required=True, choices=sorted(TARGETS))
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--max-ingress-stages", type=int, required=True)
    ap.add_argument("--max-egress-stages", type=int, required=True)
    ap.add_argument("--frontend-only", action="store_true",
                    help="p4test only (seconds): the check CI runs by default while bf-p4c does not "
                         "yet finish on this program (docs/PIPELINE.md)")
    a = ap.parse_args()

    bin_dir = tool_bin(a.tools)
    if bin_dir is None:
        print(f"SKIPPED: no P4 compilers at {a.tools} (set AGQ_P4TOOLS or -DAGQ_P4TOOLS_DIR)")
        return SKIP
    arch, tnum = TARGETS[a.target]
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '')}")
    prog = SRC / "agq.p4"

    t0 = time.monotonic()
    p = subprocess.run([str(bin_dir / "p4test"), f"-D__TARGET_TOFINO__={tnum}", "-I", str(SRC), str(prog)],
                       capture_output=True, text=True, env=env)
    t_p4test = time.monotonic() - t0
    if p.returncode != 0 or errors_in(p.stdout + p.stderr):
        sys.stdout.write(p.stdout + p.stderr)
        print(f"FAIL: p4test ({a.target}) exit {p.returncode}")
        return 1
    if a.frontend_only:
        print(f"{a.target}: p4test accepts the program ({t_p4test:.1f} s)")
        return 0

    a.out.mkdir(parents=True, exist_ok=True)
    cmd = [str(bin_dir / "bf-p4c"), "--target", a.target, "--arch", arch, "-g", *EXTRA_FLAGS[a.target],
           "-I", str(SRC), "-o", str(a.out), str(prog)]
    t0 = time.monotonic()
    c = subprocess.run(cmd, capture_output=True, text=True, env=env)
    t_bf = time.monotonic() - t0
    (a.out / "bf-p4c.log").write_text(c.stdout + c.stderr)
    errs = errors_in(c.stdout + c.stderr)
    bfa = next((a.out / "pipe").glob("*.bfa"), None) if (a.out / "pipe").is_dir() else None
    stages = stages_of(bfa) if bfa else {"ingress": 0, "egress": 0}
    # summary.json also when the compile fails after placement (the .bfa says
    # how many stages it took): what docs/PIPELINE.md quotes.
    summary = {"target": a.target, "arch": arch, "ok": c.returncode == 0 and not errs, "errors": errs[:10],
               "stages": stages, "p4test_s": round(t_p4test, 1), "bf_p4c_s": round(t_bf, 1),
               "command": " ".join(["bf-p4c"] + cmd[1:]),
               "resources": resources_of(a.out / "pipe" / "logs" / "resources.json",
                                            a.out / "pipe" / "logs" / "phv.json"),
               "placement": placement_of(bfa) if bfa else {}}
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
    if c.returncode != 0 or errs:
        sys.stdout.write(c.stdout + c.stderr)
        print(f"FAIL: bf-p4c ({a.target}) exit {c.returncode} after {t_bf:.0f} s; "
              f"stages ingress {stages['ingress']}, egress {stages['egress']} ({a.out}/summary.json)")
        return 1
    if bfa is None:
        print(f"FAIL: bf-p4c wrote no .bfa under {a.out}/pipe")
        return 1
    print(f"{a.target}: ingress {stages['ingress']} stages (budget {a.max_ingress_stages}), "
          f"egress {stages['egress']} (budget {a.max_egress_stages}); "
          f"p4test {t_p4test:.1f} s, bf-p4c {t_bf:.1f} s")
    over = []
    if stages["ingress"] > a.max_ingress_stages:
        over.append(f"ingress {stages['ingress']} > {a.max_ingress_stages}")
    if stages["egress"] > a.max_egress_stages:
        over.append(f"egress {stages['egress']} > {a.max_egress_stages}")
    if over:
        print("FAIL: above the documented stage budget (docs/PIPELINE.md): " + ", ".join(over))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
