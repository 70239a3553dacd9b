"""scripts/check_doc_links.py on a small repository of its own: every kind
of reference it checks, resolving and broken, and GitHub's heading slugs."""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_doc_links.py"
sys.path.insert(0, str(SCRIPT.parent))
import check_doc_links  # noqa: E402

FILES = {
    "README.md": """# Top
See [the protocol](docs/PROTOCOL.md#2-encoding-guard-bits-bias), [gone](docs/GONE.md),
[bad anchor](docs/PROTOCOL.md#no-such-heading), [here](#top) and [web](https://example.com/x/y).
Code: `switch/main.cpp`, `switch/main.cpp:12`, `switch/missing.cpp`, `switch/*.cpp`,
`switch/{main,cli}.cpp`, `switch/*.py`, `switch/`, `switch/main` and build/switch/agq-switch.
In prose switch/testpmd is not a path, but switch/prose.cpp is one; `results.md` is an output.
PROTOCOL.md §2, docs/PROTOCOL.md section 9, docs/PROTOCOL.md "Packet format",
docs/PROTOCOL.md "Memory", docs/PROTOCOL.md, "Nothing like it" and docs/PROTOCOL.md "Packet
format" across a line, docs/PROTOCOL.md "Encoding: guard
bits, biased" not.
```sh
build/switch/agq-switch --config conf/agq.toml --job conf/none.toml
```
[ref]: docs/PROTOCOL.md#1-packet-format
[badref]: docs/PROTOCOL.md#9-counters
""",
    "docs/PROTOCOL.md": """# The protocol
## 1. Packet format
## 2. Encoding: guard bits, bias
**Memory**: a bold lead.
## Stage map — compiled (bf-p4c), `Tofino 1`
## Repeated
## Repeated
See [up](../README.md#top), [repeat](#repeated-1), [repeat 2](#repeated-2) and `../switch/main.cpp`.
```
## not a heading
```
[in code](#not-a-heading)
""",
    "switch/main.cpp": "",
    "switch/cli.cpp": "",
    "conf/agq.toml": "",
}


def make_repo(tmp_path):
    for name, text in FILES.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    return tmp_path


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_reports_exactly_the_broken_references(tmp_path):
    root = make_repo(tmp_path)
    r = run("--root", str(root))
    assert r.returncode == 1, r.stdout + r.stderr
    got = sorted(line.split(": ", 1)[0] + ": " + line.split(": ", 1)[1].split(":")[0]
                 for line in r.stdout.splitlines() if line.startswith(("README.md", "docs/")))
    assert got == sorted([
        "README.md:2: link (docs/GONE.md)",
        "README.md:3: link (docs/PROTOCOL.md#no-such-heading)",
        "README.md:4: path switch/missing.cpp",
        "README.md:5: path switch/*.py",
        "README.md:6: path switch/prose.cpp",
        "README.md:7: docs/PROTOCOL.md section 9",
        'README.md:8: docs/PROTOCOL.md "Nothing like it"',
        'README.md:9: docs/PROTOCOL.md "Encoding',
        "README.md:12: path conf/none.toml",
        "README.md:15: link (docs/PROTOCOL.md#9-counters)",
        "docs/PROTOCOL.md:8: link (#repeated-2)",
        "docs/PROTOCOL.md:12: link (#not-a-heading)",
    ]), r.stdout
    assert "12 broken" in r.stdout


def test_a_clean_file_passes_and_bad_flags_are_refused(tmp_path):
    root = make_repo(tmp_path)
    (root / "docs/OK.md").write_text("# Ok\nSee `switch/main.cpp` and [p](PROTOCOL.md#1-packet-format).\n")
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    r = run("--root", str(root), str(root / "docs/OK.md"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 references, 0 broken" in r.stdout
    assert run("--bogus").returncode == 2


def test_github_slugs():
    assert check_doc_links.slug("10. Shards, lcores and queues (one convention for switch, workers, NICs)") == \
        "10-shards-lcores-and-queues-one-convention-for-switch-workers-nics"
    assert check_doc_links.slug("Stage map — compiled (bf-p4c), Tofino 1 and Tofino 2") == \
        "stage-map--compiled-bf-p4c-tofino-1-and-tofino-2"
    assert check_doc_links.slug("The `agq_fast` program: [model](x.md) and *fast*") == \
        "the-agq_fast-program-model-and-fast"
    assert check_doc_links.slug("Control plane → lcores (command rings)") == "control-plane--lcores-command-rings"


def test_the_repository_docs_pass():
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.path.basename(str(SCRIPT)) == "check_doc_links.py"


def test_files_of_a_commit(tmp_path):
    root = make_repo(tmp_path)
    (root / "switch/old.patch").write_text("x\n")
    (root / "docs/NOTES.md").write_text("# Notes\n## Old heading\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "c"], check=True)
    rev = subprocess.run(git + ["rev-parse", "--short=7", "HEAD"], check=True, capture_output=True,
                         text=True).stdout.strip()
    subprocess.run(git + ["rm", "-q", "switch/old.patch"], check=True)
    (root / "docs/NOTES.md").write_text("# Notes\n## New heading\n")
    (root / "docs/OLD.md").write_text(f"# Old\n`{rev}:switch/old.patch`, `{rev}:switch/gone.patch`, "
                                      f"`switch/old.patch` and `0123456:switch/x.patch` (not in this clone).\n"
                                      f'`{rev}:docs/NOTES.md`, "Old heading" then, docs/NOTES.md "New heading" '
                                      f'now, not docs/NOTES.md "Old heading" nor {rev}:docs/NOTES.md "New".\n')
    subprocess.run(git + ["add", "."], check=True)
    r = run("--root", str(root), str(root / "docs/OLD.md"))
    assert r.returncode == 1
    assert r.stdout.splitlines()[:-1] == [
        "docs/OLD.md:2: path switch/old.patch: no such file or directory",
        f"docs/OLD.md:2: {rev}:switch/gone.patch: commit {rev} has no switch/gone.patch",
        'docs/OLD.md:3: docs/NOTES.md "Old heading": no heading or bold paragraph lead of docs/NOTES.md starts '
        'with that',
        f'docs/OLD.md:3: {rev}:docs/NOTES.md "New": no heading or bold paragraph lead of {rev}:docs/NOTES.md '
        'starts with that',
    ], r.stdout
