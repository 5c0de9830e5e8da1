#!/usr/bin/env bash
# The distinct tests a commit holds, one per line, sorted: "go PKG TEST"
# for every top-level Go test, fuzz target and example (go test -list, the
# main module and bench/report), "py NODE_ID" for every pytest item make
# test collects (the union over .venv and .venv-torch2: a file that needs
# the other venv's packages skips at import and lists nothing there).
# Compare two commits' lists with comm (#66: the suite kept every test):
#
#   bash tests/list_tests.sh fa5e656 >old.txt && bash tests/list_tests.sh HEAD >new.txt
#   comm -23 old.txt new.txt   # in the old suite, not in the new
#
# Runs in a temporary worktree of COMMIT (default HEAD) with this
# checkout's venvs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
commit=${1:-HEAD}
wt=$(mktemp -d "${TMPDIR:-/tmp}/augloader-list-XXXXXX")
trap 'git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"' EXIT
git worktree add -q --detach "$wt" "$commit"
cd "$wt"
{
  for mod in . bench/report; do
    (cd "$mod" && go test -list '.*' ./... 2>/dev/null) | awk '
      /^(ok|\?)[ \t]/ { pkg = $2; for (i in held) print "go", pkg, held[i]; delete held; n = 0; next }
      /^(Test|Fuzz|Example|Benchmark)/ { held[n++] = $1 }'
  done
  for venv in .venv .venv-torch2; do
    [ -x "$root/$venv/bin/python" ] || continue
    "$root/$venv/bin/python" -m pytest --collect-only -q -p no:cacheprovider --rootdir "$wt" tests/interop clients/python/tests bench/peers 2>/dev/null |
      grep '::' | sed 's/^/py /' || true
  done
} | sort -u
