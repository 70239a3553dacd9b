#!/usr/bin/env python3
"""Checks that the documentation's cross references resolve.

    scripts/check_doc_links.py [--root DIR] [FILE.md ...]

DIR: the repository (default: the one this script is in); FILE.md: the files
to check (default: every tracked Markdown file).

In each Markdown file it checks
  * Markdown links, [text](target) and [label]: target: a relative target
    must be a repository file or directory, and a #anchor must be a heading
    of the target (GitHub's slugs: lower case, punctuation dropped, spaces to
    hyphens, -1, -2 ... for repeats);
  * paths written in the text or in code (`switch/main.cpp`, conf/agq.toml,
    tests/integration/test_*.py): a word whose first directory is a
    top-level directory of the repository (or a directory beside the
    Markdown file), or a bare NAME.md (capitalised, or a name some file
    has), must name a tracked file or directory, relative to the file or to
    the repository root; globs and {a,b} match at least one file; FILE:LINE
    suffixes are ignored; REV:PATH (a file as a commit has it, e.g. one
    since removed) must be in that commit, when the clone has the commit;
  * references to a section, FILE.md "Heading" and FILE.md section N / §N: a
    heading of FILE.md, or a paragraph's bold lead (**Memory**: ...), must
    start with that text (a heading with N.); REV:FILE.md "Heading": the
    same in the file as commit REV has it.
Paths under build*/ and absolute paths are not repository files and are not
checked. Prints FILE:LINE: what is wrong for every broken reference and exits
1 if there is any. Standard library only; registered as the ctest
lint_doc_links (tests/lint).
"""
import fnmatch
import itertools
import os
import re
import subprocess
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # --root DIR: another tree
FILES, DIRS, TOP = set(), set(), set()  # tracked files, their directories, the top-level ones
BASENAMES = set()

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# A paragraph's bold lead, the docs' run-in heading: "**Memory**: ..." or
# "* **The mbuf pool without hugepages** (...)".
BOLD_LEAD = re.compile(r"^\s*(?:[*+-]\s+)?\*\*([^*]+)")
INLINE_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+.*)?$")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
# A path-like word: not preceded by a path character (so build/switch/x is
# not read as switch/x), made of path characters, globs and braces.
PATH_WORD = re.compile(r"(?<![\w./~$@{<:-])((?:\.\./|\./)*[\w.*?\-+]+(?:\{[\w.,\-]+\})?"
                       r"(?:/[\w.*?\-+]*(?:\{[\w.,\-]+\})?)*)(#[\w\-]+)?")
# A file as a commit has it, REV:PATH (`git show 8cbad09:bench/x.patch`).
REV_PATH = re.compile(r"(?<![\w/.:-])([0-9a-f]{7,40}):((?:[\w.\-]+/)*[\w.\-]+)")
MD_NAME = re.compile(r"^[\w.\-]+\.md$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# Paths the docs name that are not in the repository on purpose.
NOT_FILES = {
    "conf/my.toml",                    # conf/README.md: the reader's own copy of an example
    "tests/ptf_suite/agq_suite.toml",  # p4src/README.md: written by tests/ptf_suite/cases.py
    "FILE.md",                         # CONTRIBUTING.md: the placeholder of a reference's form
}
# FILE.md "Heading" / FILE.md, "Heading" / FILE.md section N / FILE.md §N,
# and REV:FILE.md "Heading" (the file as commit REV has it)
SECTION_REF = re.compile(r"(?<![\w/.-])(?:([0-9a-f]{7,40}):)?((?:[\w.\-]+/)*[\w.\-]+\.md)`?,?\s+"
                         r"(?:\"([^\"]+)\"|(?:section|§)\s*(\d+(?:\.\d+)*))")


_docs = {}  # Doc of each Markdown file read so far


def tracked_files():
    """The repository's files (git's index, or the tree when not a checkout)."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], check=True, capture_output=True).stdout
        files = [f for f in out.decode().split("\0") if f]
        # Deleted in the work tree but not yet in the index: gone.
        return {f for f in files if os.path.lexists(os.path.join(ROOT, f))}
    except (OSError, subprocess.CalledProcessError):
        files = set()
        for d, subdirs, names in os.walk(ROOT):
            subdirs[:] = [s for s in subdirs if not s.startswith((".", "build"))]
            files.update(os.path.relpath(os.path.join(d, n), ROOT) for n in names)
        return files


def in_commit(rev, path):
    """True or False: whether commit rev has path; None when the commit is
    not in this clone (a shallow one), so nothing can be said."""
    def git_ok(obj):
        return subprocess.run(["git", "-C", ROOT, "cat-file", "-e", obj], capture_output=True).returncode == 0
    try:
        if not git_ok(rev + "^{commit}"):
            return None
        return git_ok(f"{rev}:{path}")
    except OSError:
        return None


def load(root):
    global ROOT
    ROOT = os.path.abspath(root)
    FILES.clear(), DIRS.clear(), TOP.clear(), BASENAMES.clear(), _docs.clear()
    FILES.update(tracked_files())
    BASENAMES.update(os.path.basename(f) for f in FILES)
    for f in FILES:
        parts = f.split("/")[:-1]
        DIRS.update(itertools.accumulate(parts, lambda a, b: a + "/" + b))
    TOP.update(f.split("/", 1)[0] for f in FILES if "/" in f)


def exists(rel):
    return rel in FILES or rel.rstrip("/") in DIRS


def expand_braces(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    return [x for alt in m.group(1).split(",") for x in expand_braces(p[:m.start()] + alt + p[m.end():])]


def resolves(word, doc_dir):
    """Whether a path word names a tracked file or directory (globs: at least
    one; a name without its extension, such as app/link_watch: the files of
    that stem)."""
    if MD_NAME.match(word):
        return md_target(word, doc_dir) is not None
    for alt in expand_braces(word):
        for base in (doc_dir, ""):
            rel = os.path.normpath(os.path.join(base, alt)) if alt.strip("/") else ""
            if rel.startswith(".."):
                continue
            if any(c in rel for c in "*?["):
                if fnmatch.filter(FILES, rel) or fnmatch.filter(DIRS, rel):
                    break
            elif exists(rel + ("/" if alt.endswith("/") else "")):
                break
            elif "." not in os.path.basename(rel) and fnmatch.filter(FILES, rel + ".*"):
                break
        else:
            return False
    return True


def slug(text):
    """GitHub's heading anchor (github-slugger) of a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)                      # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)           # _emphasis_, not snake_case
    out = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LNM":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def plain(text):
    return " ".join(slug(text).replace("-", " ").split())


class Doc:
    def __init__(self, rel, text=None):
        self.rel = rel
        self.dir = os.path.dirname(rel)
        if text is None:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                text = f.read()
        self.lines = text.split("\n")
        self.headings = []  # (text, slug)
        self.code = []      # per line: inside a fenced code block
        seen = {}
        fenced = False
        for line in self.lines:
            if FENCE.match(line):
                fenced = not fenced
                self.code.append(True)
                continue
            self.code.append(fenced)
            m = None if fenced else HEADING.match(line)
            if m:
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                self.headings.append((m.group(2), s if n == 0 else f"{s}-{n}"))
        self.anchors = {s for _, s in self.headings}
        self.leads = [m.group(1) for m, code in zip(map(BOLD_LEAD.match, self.lines), self.code) if m and not code]


def doc(rel, rev=None):
    """The Doc of a tracked Markdown file, or of the file as commit rev has
    it (None when the commit is not in this clone or lacks the file)."""
    if (rev, rel) not in _docs:
        if rev is None:
            _docs[None, rel] = Doc(rel)
        else:
            r = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{rel}"], capture_output=True)
            _docs[rev, rel] = Doc(rel, r.stdout.decode("utf-8", "replace")) if r.returncode == 0 else None
    return _docs[rev, rel]


def md_target(name, doc_dir):
    """The tracked Markdown file a reference names: beside the doc, at the
    root, or (a bare NAME.md) the only tracked file of that name."""
    for base in (doc_dir, ""):
        rel = os.path.normpath(os.path.join(base, name))
        if rel in FILES:
            return rel
    if "/" not in name:
        same = [f for f in FILES if os.path.basename(f) == name]
        if len(same) == 1:
            return same[0]
    return None


def looks_like_path(word, doc_dir, in_code):
    """Whether a word is meant as a repository path: its first directory is a
    top-level one or one beside the doc (in prose, it must also end in an
    extension or a /: "switch/testpmd ratios" is not a path)."""
    if word in NOT_FILES:
        return False
    if word.startswith(("../", "./")):
        rel = os.path.normpath(os.path.join(doc_dir, word))
        return not rel.startswith("..") and rel.split("/", 1)[0] in TOP  # else outside the repository
    if not in_code and not (word.endswith("/") or "." in os.path.basename(word)):
        return False
    if "/" in word:
        first = word.split("/", 1)[0]
        return first in TOP or (doc_dir and os.path.join(doc_dir, first) in DIRS)
    # A bare NAME.md: the docs are named in capitals (PROTOCOL.md); a lower-case
    # name no file has is an output (run.py's results.md), not a reference.
    return bool(MD_NAME.match(word)) and (word[0].isupper() or word in BASENAMES)


def path_words(text, fenced):
    """The path-like words of a line, each with whether it is in code (a code
    span or a fenced block)."""
    if fenced:
        return [(m, True) for m in PATH_WORD.finditer(text)]
    out, at = [], 0
    for span in CODE_SPAN.finditer(text):
        out += [(m, False) for m in PATH_WORD.finditer(text[at:span.start()])]
        out += [(m, True) for m in PATH_WORD.finditer(span.group(2))]
        at = span.end()
    return out + [(m, False) for m in PATH_WORD.finditer(text[at:])]


def check_file(rel):
    """(errors, references checked) of one Markdown file."""
    d = doc(rel)
    errors = []
    checked = 0

    def err(lineno, msg):
        errors.append(f"{rel}:{lineno}: {msg}")

    def check_anchor(lineno, target_rel, anchor, what):
        nonlocal checked
        checked += 1
        if not target_rel.endswith(".md"):
            err(lineno, f"{what}: #{anchor} on {target_rel}, which is not a Markdown file")
        elif anchor not in doc(target_rel).anchors:
            err(lineno, f"{what}: {target_rel} has no heading #{anchor}")

    for lineno, line in enumerate(d.lines, 1):
        # Markdown links.
        targets = [m.group(1) for m in INLINE_LINK.finditer(line)]
        m = REF_DEF.match(line)
        if m:
            targets.append(m.group(1))
        for t in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I) or t.startswith("/"):
                continue  # a URL, mailto:, or an absolute path
            checked += 1
            path, _, anchor = t.partition("#")
            if not path:
                check_anchor(lineno, rel, anchor, f"link ({t})")
                continue
            if not resolves(path, d.dir):
                err(lineno, f"link ({t}): no such file or directory")
                continue
            if anchor:
                target = os.path.normpath(os.path.join(d.dir, path))
                check_anchor(lineno, target if target in FILES else os.path.normpath(path), anchor, f"link ({t})")

        # Paths in the text and in code, outside links' targets and URLs.
        text = URL.sub(" ", INLINE_LINK.sub(lambda m: m.group(0).split("](", 1)[0], line))
        if REF_DEF.match(line):
            text = ""
        for m, in_code in path_words(text, d.code[lineno - 1]):
            word = re.sub(r":\d+(-\d+)?$", "", m.group(1)).rstrip(".")
            if not word or not looks_like_path(word, d.dir, in_code):
                continue
            checked += 1
            if not resolves(word, d.dir):
                err(lineno, f"path {word}: no such file or directory")
            elif m.group(2) and word.endswith(".md"):
                target = md_target(word, d.dir)
                if target:
                    check_anchor(lineno, target, m.group(2)[1:], f"path {word}{m.group(2)}")

        for m in REV_PATH.finditer(text):
            if looks_like_path(m.group(2), "", True):
                checked += 1
                if in_commit(m.group(1), m.group(2)) is False:
                    err(lineno, f"{m.group(1)}:{m.group(2)}: commit {m.group(1)} has no {m.group(2)}")

        # FILE.md "Heading" and FILE.md section N, also when the heading's
        # name goes on on the next line.
        nxt = d.lines[lineno] if lineno < len(d.lines) else ""
        for m in SECTION_REF.finditer(line + " " + nxt.strip()):
            if m.start() >= len(line):
                break
            rev, name, heading, num = m.groups()
            if rev:
                if in_commit(rev, name) is None:
                    continue  # the commit is not in this clone
                target, where = os.path.normpath(name), f"{rev}:{os.path.normpath(name)}"
                t = doc(target, rev)
                if t is None:
                    continue  # reported above: the commit has no such file
            else:
                target = where = md_target(name, d.dir)
                if target is None:
                    continue  # reported above as a path if it looks like one
                t = doc(target)
            checked += 1
            ref = f"{rev}:{name}" if rev else name
            if heading:
                want = plain(heading)
                heads = [plain(h) for h, _ in t.headings] + [plain(b) for b in t.leads]
                heads += [re.sub(r"^\d+( \d+)* ", "", h) for h in heads]  # "Packet format" for "1. Packet format"
                if not any(h.startswith(want) for h in heads):
                    err(lineno, f'{ref} "{heading}": no heading or bold paragraph lead of {where} starts with that')
            elif not any(re.match(re.escape(num) + r"(\.|\s|$)", h) for h, _ in t.headings):
                err(lineno, f"{ref} section {num}: {where} has no heading numbered {num}")
    return errors, checked


def main(argv):
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    root = ROOT
    if argv[:1] == ["--root"]:
        if len(argv) < 2:
            print("check_doc_links.py: --root needs a directory", file=sys.stderr)
            return 2
        root, argv = argv[1], argv[2:]
    bad = [a for a in argv if a.startswith("-")]
    if bad:
        print(f"check_doc_links.py: unknown option {bad[0]}\n\n{__doc__.strip()}", file=sys.stderr)
        return 2
    load(root)
    if argv:
        docs = [os.path.relpath(os.path.abspath(a), ROOT) for a in argv]
    else:
        docs = sorted(f for f in FILES if f.endswith(".md"))
    errors, checked = [], 0
    for rel in docs:
        e, n = check_file(rel)
        errors += e
        checked += n
    for e in errors:
        print(e)
    print(f"check_doc_links: {len(docs)} Markdown files, {checked} references, {len(errors)} broken")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
