#!/usr/bin/env bash
# Structures at scale (#67): N OC20-shaped structures (STRUCT_N, default
# 1,000,000; shardconv synth --like oc20, extxyz files of 100,000) converted
# out of core (the converter's peak RSS), then served from a loopback
# S3-compatible server (s3proxy, make s3proxy) under --cache-limit 1GiB and
# --memory-budget 256MiB: an epoch read through (balanced batches of 1,200
# atoms, rotated), its time, GETs and bytes, and the daemon's peak RSS.
# Prints RESULT lines (bench/results/structures-scale.txt keeps a run).
#
# Usage: bash bench/structures_scale.sh   (STRUCT_N=20000 for a quick run; needs ~25 GB free at 1M)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${STRUCT_N:-1000000}
B=${STRUCT_BIN:-bin}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/augloader-structs-XXXXXX")
. bench/s3lib.sh

t0=$(date +%s.%N)
"$B"/shardconv synth --like oc20 --graphs "$N" --seed 1 -o "$TMP/in" 2>/dev/null
t1=$(date +%s.%N)
in_bytes=$(du -sb "$TMP/in" | cut -f1)
echo "RESULT kind=scale step=synth structures=$N seconds=$(echo "$t1 - $t0" | bc -l | xargs printf %.1f) bytes=$in_bytes"
/usr/bin/time -f '%e %M' -o "$TMP/convert.time" "$B"/shardconv convert -q -i "$TMP/in" -o "$TMP/s" --cutoff 6
read -r secs rss <"$TMP/convert.time"
out_bytes=$(du -sb "$TMP/s" | cut -f1)
echo "RESULT kind=scale step=convert structures=$N seconds=$secs structures_s=$(echo "$N / $secs" | bc) peak_rss_mib=$((rss / 1024)) shard_bytes=$out_bytes"
rm -rf "$TMP/in"
mkdir -p "$TMP/data/bench"
cp -al "$TMP/s" "$TMP/data/bench/oc20"
start_s3proxy "$TMP/data"
MPORT=$(free_port)
t0=$(date +%s.%N)
AWS_ENDPOINT_URL=http://127.0.0.1:$S3PORT "$B"/augloader serve --shards s3://bench/oc20 --socket "$TMP/s.sock" \
  --metrics "127.0.0.1:$MPORT" --cache-limit 1GiB --memory-budget 256MiB --max-atoms 1200 --rotate >"$TMP/serve.ready" 2>"$TMP/serve.log" &
pid=$!
PIDS+=($pid)
until grep -q '"ready":true' "$TMP/serve.ready" 2>/dev/null; do kill -0 "$pid" || { cat "$TMP/serve.log"; exit 1; }; sleep 0.05; done
t1=$(date +%s.%N)
"$B"/augloader fetch --socket "$TMP/s.sock" --epoch 0 --no-digest --json >"$TMP/e0.json"
hwm=$(awk '/VmHWM/ {print int($2 / 1024)}' /proc/$pid/status)
metric() { curl -s "http://127.0.0.1:$MPORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
gets=$(metric augloader_objstore_gets_total)
bytes=$(metric augloader_objstore_bytes_total)
python3 - "$TMP/e0.json" "$(echo "$t1 - $t0" | bc -l)" "$hwm" "${gets:-0}" "${bytes:-0}" "$out_bytes" <<'PY'
import json, sys
e, ready, hwm, gets, nbytes, shard_bytes = sys.argv[1:]
d = json.load(open(e))
print(f"RESULT kind=scale step=serve-s3 structures={d['graphs']} batches={d['batches']} epoch_s={d['seconds']:.1f} "
      f"structures_s={d['graphs'] / max(d['seconds'], 1e-9):.0f} ready_s={float(ready):.2f} peak_rss_mib={hwm} "
      f"gets={int(float(gets))} bytes={int(float(nbytes))} shard_bytes={shard_bytes} cache_limit_mib=1024 memory_budget_mib=256")
PY
