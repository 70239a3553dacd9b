"""scripts/format.sh and scripts/check_commits.sh on a repository of their
own: a main branch and a feature branch on top of it."""
import shutil
import subprocess
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]

# Already formatted, and a line the style would change that the branch
# does not touch (it must stay as it is).
BASE_CPP = "int keep_me( int x ){return x;}\n\nint f(int x) { return x + 1; }\n"


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


def make_repo(tmp_path):
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    (root / "src").mkdir()
    for s in ("format.sh", "check_commits.sh"):
        shutil.copy(SRC / "scripts" / s, root / "scripts" / s)
    shutil.copy(SRC / ".clang-format", root / ".clang-format")
    (root / "src" / "a.cpp").write_text(BASE_CPP)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    git(root, "checkout", "-qb", "feat")
    return root


def run(root, script, *args):
    return subprocess.run([str(root / "scripts" / script), *args], capture_output=True, text=True, timeout=60)


def test_format_touches_only_the_changed_lines(tmp_path):
    root = make_repo(tmp_path)
    a = root / "src" / "a.cpp"
    a.write_text(BASE_CPP + "int  g( int y ){return y*2;}\n")
    r = run(root, "format.sh", "--check")
    assert r.returncode == 1
    assert "+int g(int y) { return y * 2; }" in r.stdout and "+int keep_me" not in r.stdout, r.stdout
    assert run(root, "format.sh").returncode == 0
    assert a.read_text() == BASE_CPP + "int g(int y) { return y * 2; }\n"
    assert run(root, "format.sh", "--check").returncode == 0
    # --whole: every line of the file, the untouched one too.
    assert run(root, "format.sh", "--whole", "--check", "src/a.cpp").returncode == 1
    assert run(root, "format.sh", "--bogus").returncode == 2


def test_commit_subjects(tmp_path):
    root = make_repo(tmp_path)
    assert run(root, "check_commits.sh").returncode == 0  # nothing on the branch yet
    (root / "x").write_text("1")
    git(root, "add", "x")
    git(root, "commit", "-qm", "a subject that says what changed\n\nThe detail, in the body.")
    assert run(root, "check_commits.sh").returncode == 0
    (root / "x").write_text("2")
    git(root, "commit", "-qam", "s" * 73)
    (root / "x").write_text("3")
    git(root, "commit", "-qam", "short subject\nno blank line before this")
    r = run(root, "check_commits.sh")
    assert r.returncode == 1
    out = r.stdout.splitlines()
    assert len(out) == 2 and "subject of 73 characters" in out[0] and "no blank line" in out[1], r.stdout
    assert "3 commits of main..HEAD" in r.stderr
    assert run(root, "check_commits.sh", "main..HEAD~2").returncode == 0
