"""bench/tools: every driver parses, prints its header on --help and is
documented in bench/tools/README.md; memif_setup.sh still writes the memif
part's job file from bench/run.py (the drivers' one dependency on it)."""
import os
import subprocess
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "bench" / "tools"
SCRIPTS = sorted(TOOLS.glob("*.sh"))
DRIVERS = [s for s in SCRIPTS if s.name != "memif_setup.sh"]


def test_the_tools_are_there():
    assert {s.name for s in DRIVERS} >= {"memif_close.sh", "memif_cycles.sh", "command_pause.sh", "callgrind_memif.sh"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.name)
def test_parses_and_is_documented(script):
    subprocess.run(["bash", "-n", str(script)], check=True)
    assert f"`{script.name}" in (TOOLS / "README.md").read_text(), f"{script.name} is not in bench/tools/README.md"


@pytest.mark.parametrize("script", DRIVERS, ids=lambda s: s.name)
def test_help_prints_the_header(script):
    assert os.access(script, os.X_OK)
    r = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"# {script.name} ") and all(line.startswith("#") for line in lines), r.stdout


def test_memif_setup_writes_the_memif_job(tmp_path):
    root = TOOLS.parents[1]
    r = subprocess.run(["bash", "-c", f'set -eu; root={root}; work={tmp_path}; . {TOOLS}/memif_setup.sh; vdev 1 server'],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"--vdev=net_memif1,role=server,id=0,socket={tmp_path}/m1.sock,socket-abstract=no"
    conf = (tmp_path / "agq.toml").read_text()
    assert conf.startswith('[switch]\npipeline = "agq"\n[agq]\n')
    assert conf.count("[[job]]") == 1 and "ps_port = 1" in conf and conf.count("[[job.worker]]") == 4
    assert 'mac = "02:00:00:00:00:02"\nport = 1' in conf
