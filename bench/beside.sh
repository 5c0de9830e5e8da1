#!/usr/bin/env bash
# The cache cliff and the object-storage rows of docs/bench.md measured for
# two builds in one run, an older commit's binaries beside this tree's, so
# that a change that should cost nothing (a check per page, not a copy) is
# compared within one machine's day: bench/cliff.sh (3 runs each), then
# bench/s3.sh (MosaicML skipped) with the two builds alternating row by row,
# BESIDE_ROUNDS rounds (default 2).
#
# Usage: bash bench/beside.sh OLD_COMMIT > bench/results/beside.txt
#   BESIDE_CLIFF=0 skips the cliff; BESIDE_S3_ROWS="s3 s3-20ms" runs only
#   those object-storage rows (bench/s3.sh's S3_ROWS).
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: bash bench/beside.sh OLD_COMMIT}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/augloader-beside-XXXXXX")
trap 'git worktree remove --force "$TMP/tree" 2>/dev/null || true; rm -rf "$TMP"' EXIT
git worktree add -q --detach "$TMP/tree" "$old"
(cd "$TMP/tree" && go build -o "$TMP/old/" ./cmd/...)
make --no-print-directory build >/dev/null
echo "# bench/beside.sh $old: old = $(git rev-parse --short "$old"), new = $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes'), $(date -u +%F)"
if [ "${BESIDE_CLIFF:-1}" = 1 ]; then
  for who in old new; do
    bin=$TMP/old; [ "$who" = new ] && bin=bin
    echo "# bench/cliff.sh, $who"
    bash bench/cliff.sh "$bin" 64MiB 3 | sed "s/^RESULT /RESULT build=$who /"
  done
fi
echo "# bench/s3.sh (MOSAIC=0), the builds alternating row by row, ${BESIDE_ROUNDS:-2} rounds${BESIDE_S3_ROWS:+, rows: $BESIDE_S3_ROWS}"
MOSAIC=0 S3_BUILDS="new=bin old=$TMP/old" S3_ROUNDS=${BESIDE_ROUNDS:-2} S3_ROWS=${BESIDE_S3_ROWS:-} bash bench/s3.sh
