#!/usr/bin/env bash
# Conversion benchmark on the real COLLAB (../shared/datasets): unpacks the
# .tar.xz once to a temporary folder, warms the page cache, times `wc -l`
# and `shardconv convert` on the same files (best of 5 with zstd, the
# default; best of 3 with lz4 and with none), and reports input MB/s, peak
# RSS and CPU time, the ratio to wc -l and each run's split between
# reading the graphs and writing the shards.
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
# conv COMPRESSION RUNS: best of RUNS conversions, with that run's split
# between reading the graphs and writing the shards after them (from
# shardconv's summary line; the total is timed from outside, process start
# included), as "total read write".
conv() {
  local b=999999 br=0 bw=0
  for _ in $(seq "$2"); do
    rm -rf "$TMP/out"
    local line t r w s e
    s=$(date +%s.%N)
    line=$(bin/shardconv convert -i "$IN" -o "$TMP/out" --compression "$1" 2>&1 | tail -1)
    e=$(date +%s.%N)
    t=$(echo "$e - $s" | bc -l)
    r=$(sed -E 's/.*: ([0-9.]+)s reading.*/\1/' <<<"$line")
    w=$(sed -E 's/.*, ([0-9.]+)s writing.*/\1/' <<<"$line")
    if awk -v t="$t" -v b="$b" 'BEGIN{exit !(t<b)}'; then b=$t br=$r bw=$w; fi
  done
  echo "$b $br $bw"
}
read -r conv_s read_s write_s <<<"$(conv zstd 5)"
read -r lz4_s lz4_read_s lz4_write_s <<<"$(conv lz4 3)"
read -r none_s none_read_s none_write_s <<<"$(conv none 3)"
# The default conversion pinned to one core (best of 3; 0 without
# taskset): next to the CPU time below, it shows whether more cores help.
pinned() {
  command -v taskset > /dev/null || { echo 0; return; }
  local b=999999
  for _ in 1 2 3; do
    rm -rf "$TMP/out"
    local s e
    s=$(date +%s.%N)
    taskset -c 0 bin/shardconv convert -q -i "$IN" -o "$TMP/out"
    e=$(date +%s.%N)
    b=$(echo "$e - $s" | bc -l | awk -v b="$b" '{print ($1<b)?$1:b}')
  done
  echo "$b"
}
one_s=$(pinned)
# One more run for peak RSS and the CPU time it took (user + system).
read -r rss cpu_s <<<"$( { /usr/bin/time -f '%M %U %S' bin/shardconv convert -q -i "$IN" -o "$TMP/out2"; } 2>&1 | tail -1 | awk '{print $1, $2 + $3}')"
cores=$(nproc)
echo "COLLAB input: $bytes bytes"
printf 'wc -l A.txt:        %.3f s\n' "$wc_s"
printf 'shardconv convert:  %.3f s  (%.0f MB/s of input, %.1fx wc -l; %.2f s reading the graphs, %.2f s writing the shards)\n' "$conv_s" "$(echo "$bytes/1000000/$conv_s" | bc -l)" "$(echo "$conv_s/$wc_s" | bc -l)" "$read_s" "$write_s"
printf '  --compression lz4:  %.3f s  (%.2f s + %.2f s)\n' "$lz4_s" "$lz4_read_s" "$lz4_write_s"
printf '  --compression none: %.3f s  (%.2f s + %.2f s)\n' "$none_s" "$none_read_s" "$none_write_s"
printf '  on one core:        %.3f s\n' "$one_s"
echo "peak RSS:           $((rss / 1024)) MiB; CPU time $cpu_s s on $cores cores"
lines=$(wc -l < "$IN/COLLAB_A.txt")
# One machine-readable line for bench/report.
echo "RESULT bytes=$bytes a_lines=$lines wc_s=$wc_s convert_s=$conv_s read_s=$read_s write_s=$write_s lz4_s=$lz4_s lz4_read_s=$lz4_read_s lz4_write_s=$lz4_write_s none_s=$none_s none_read_s=$none_read_s none_write_s=$none_write_s rss_kib=$rss cpu_s=$cpu_s cores=$cores one_core_s=$one_s"
