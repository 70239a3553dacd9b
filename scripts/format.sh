#!/usr/bin/env bash
# Formats the C++ lines a branch changes with the repository's .clang-format
# (clang-format 14, Debian's clang-format package), leaving every other line
# as it is: new code follows the style without a tree-wide reformat.
#
#   scripts/format.sh                 # lines changed since `git merge-base HEAD main`,
#                                     # committed or not, formatted in place
#   scripts/format.sh --check         # the same, but only print the diff; exit 1 if any
#   scripts/format.sh --base REV      # lines changed since REV instead
#   scripts/format.sh PATH...         # only the changed lines under these paths
#   scripts/format.sh --whole FILE... # every line of these files (a new file, say)
#
# C++ files: *.cpp *.hpp *.h *.cc. Files deleted since the base are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,13p' "$0" >&2; exit 2; }

check=0 whole=0 base=
paths=()
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1 ;;
    --whole) whole=1 ;;
    --base) [ $# -ge 2 ] || usage; base=$2; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "format.sh: unknown option '$1'" >&2; usage ;;
    *) paths+=("$1") ;;
  esac
  shift
done

for tool in clang-format-14 clang-format-diff-14; do
  command -v "$tool" >/dev/null || { echo "format.sh: $tool not found (apt-get install clang-format)" >&2; exit 2; }
done
cxx=('*.cpp' '*.hpp' '*.h' '*.cc')

if [ "$whole" -eq 1 ]; then
  [ ${#paths[@]} -gt 0 ] || { echo "format.sh: --whole needs files" >&2; usage; }
  if [ "$check" -eq 1 ]; then
    status=0
    for f in "${paths[@]}"; do
      clang-format-14 "$f" | diff -u --label "a/$f" --label "b/$f" "$f" - || status=1
    done
    exit "$status"
  fi
  exec clang-format-14 -i "${paths[@]}"
fi

if [ -z "$base" ]; then
  main=main
  git rev-parse -q --verify main >/dev/null || main=origin/main
  base=$(git merge-base HEAD "$main") || { echo "format.sh: no merge base with $main (use --base REV)" >&2; exit 2; }
fi
spec=()
if [ ${#paths[@]} -gt 0 ]; then
  for p in "${paths[@]}"; do
    case "$p" in
      *.cpp|*.hpp|*.h|*.cc) spec+=("$p") ;;
      *) for g in "${cxx[@]}"; do spec+=("${p%/}/$g"); done ;;  # git's * spans directories
    esac
  done
else
  spec=("${cxx[@]}")
fi

# -U0: only the changed lines; the working tree against the base, so that
# uncommitted edits count too. clang-format-diff is stdlib Python.
changes=$(git diff -U0 --no-color --diff-filter=d "$base" -- "${spec[@]}")
if [ -z "$changes" ]; then
  echo "format.sh: no C++ changes since ${base:0:12}"
  exit 0
fi
if [ "$check" -eq 1 ]; then
  out=$(/usr/bin/python3 /usr/bin/clang-format-diff-14 -p1 -sort-includes <<<"$changes")
  if [ -n "$out" ]; then
    printf '%s\n' "$out"
    echo "format.sh: the lines above do not follow .clang-format (scripts/format.sh fixes them)" >&2
    exit 1
  fi
  echo "format.sh: changed C++ lines since ${base:0:12} follow .clang-format"
else
  /usr/bin/python3 /usr/bin/clang-format-diff-14 -p1 -i -sort-includes <<<"$changes"
fi
