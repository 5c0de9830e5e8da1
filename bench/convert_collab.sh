#!/usr/bin/env bash
# Conversion benchmark on the real COLLAB (../shared/datasets): unpacks the
# .tar.xz once to a temporary folder, warms the page cache, times `wc -l`
# and `shardconv convert` on the same files (best of 5), and reports input
# MB/s, peak RSS and the ratio to wc -l.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=../shared/datasets/tu/COLLAB/COLLAB_tu.tar.xz
[ -f "$SRC" ] || { echo "convert_collab: $SRC absent, skipping"; exit 0; }
go build -o bin/ ./cmd/shardconv
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
xz -dc "$SRC" | tar -x -C "$TMP"
IN="$TMP/COLLAB"
cat "$IN"/* > /dev/null
bytes=$(cat "$IN"/* | wc -c)
best() { local b=999999; for _ in 1 2 3 4 5; do local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N); b=$(echo "$e - $s" | bc -l | awk -v b="$b" '{print ($1<b)?$1:b}'); done; echo "$b"; }
wc_s=$(best wc -l "$IN/COLLAB_A.txt")
conv() { rm -rf "$TMP/out"; bin/shardconv convert -q -i "$IN" -o "$TMP/out"; }
conv_s=$(best conv)
rss=$( { /usr/bin/time -f '%M' bin/shardconv convert -q -i "$IN" -o "$TMP/out2"; } 2>&1 | tail -1)
echo "COLLAB input: $bytes bytes"
printf 'wc -l A.txt:        %.3f s\n' "$wc_s"
printf 'shardconv convert:  %.3f s  (%.0f MB/s of input, %.1fx wc -l)\n' "$conv_s" "$(echo "$bytes/1000000/$conv_s" | bc -l)" "$(echo "$conv_s/$wc_s" | bc -l)"
echo "peak RSS:           $((rss / 1024)) MiB"
lines=$(wc -l < "$IN/COLLAB_A.txt")
# One machine-readable line for bench/report.
echo "RESULT bytes=$bytes a_lines=$lines wc_s=$wc_s convert_s=$conv_s rss_kib=$rss"
