#!/usr/bin/env bash
# Checks the messages of the commits a branch adds (CONTRIBUTING.md,
# "Commits"): a subject of at most 72 characters, and a blank line between
# it and the body, where the detail goes.
#
#   scripts/check_commits.sh            # the commits of main..HEAD
#   scripts/check_commits.sh REV..REV   # another range (any git log range)
#
# Prints every commit that breaks a rule and exits 1 if there is one. Not
# run by CI: CI builds a fresh clone of main, where main..HEAD is empty.
set -euo pipefail
cd "$(dirname "$0")/.."

max=72
case "${1:-}" in
  -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
  -*) echo "check_commits.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "usage: scripts/check_commits.sh [RANGE]" >&2; exit 2; }
if [ $# -eq 1 ]; then
  range=$1
else
  main=main
  git rev-parse -q --verify main >/dev/null || main=origin/main
  range=$main..HEAD
fi

bad=0 n=0
for hash in $(git rev-list --reverse "$range"); do
  n=$((n + 1))
  msg=$(git log -1 --format=%B "$hash")
  subject=$(sed -n 1p <<<"$msg")
  second=$(sed -n 2p <<<"$msg")
  short=$(git rev-parse --short "$hash")
  if [ ${#subject} -gt $max ]; then
    echo "$short: subject of ${#subject} characters (at most $max; the detail goes in the body): $subject"
    bad=1
  fi
  if [ -n "$second" ]; then
    echo "$short: no blank line between the subject and the body: $subject"
    bad=1
  fi
done
echo "check_commits: $n commits of $range checked" >&2
exit $bad
