#!/usr/bin/env bash
# The cache cliff and the object-storage rows of docs/bench.md measured for
# two builds in one run, an older commit's binaries beside this tree's, so
# that a change that should cost nothing (a check per page, not a copy) is
# compared within one machine's day: bench/cliff.sh (3 runs each), then
# bench/s3.sh (MosaicML skipped) for the new build and the old.
#
# Usage: bash bench/beside.sh OLD_COMMIT > bench/results/beside.txt
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: bash bench/beside.sh OLD_COMMIT}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/augloader-beside-XXXXXX")
trap 'git worktree remove --force "$TMP/tree" 2>/dev/null || true; rm -rf "$TMP"' EXIT
git worktree add -q --detach "$TMP/tree" "$old"
(cd "$TMP/tree" && go build -o "$TMP/old/" ./cmd/...)
make --no-print-directory build >/dev/null
echo "# bench/beside.sh $old: old = $(git rev-parse --short "$old"), new = $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes'), $(date -u +%F)"
for who in old new; do
  bin=$TMP/old; [ "$who" = new ] && bin=bin
  echo "# bench/cliff.sh, $who"
  bash bench/cliff.sh "$bin" 64MiB 3 | sed "s/^RESULT /RESULT build=$who /"
done
for who in new old; do
  bin=$TMP/old; [ "$who" = new ] && bin=bin
  echo "# bench/s3.sh (MOSAIC=0), $who"
  MOSAIC=0 S3_BIN=$bin bash bench/s3.sh | sed "s/^RESULT /RESULT build=$who /"
done
