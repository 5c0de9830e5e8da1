#!/usr/bin/env bash
# Larger than memory (issue 27): an ogbg-ppa-shaped synthetic set in OGB's
# npz layout (LARGE_GRAPHS graphs, default 40,000: about 3.8 GB of npz,
# 3 GB of decoded shards plus 2 GB of NodeSam indexes) and one a tenth of
# it. Prints RESULT lines:
#   kind=convert   conversion time and peak RSS of each (RSS should not grow with the input)
#   kind=serve     an epoch of NodeSam over the Unix socket (--memory-budget 256MiB,
#                  --ppr-cache 0): --cache-limit 1GiB inside
#                  a memory cgroup of 2 GiB (the daemon and the page cache together;
#                  made and removed here, or the run says it could not), and the same
#                  set fully cached (no limit, no cgroup) in the same shuffle;
#                  graphs/s of epoch 1 (epoch 0 warms), peak RSS, cgroup peak
#   kind=start     time from starting the daemon to its first batch, 1x and 10x the data
set -euo pipefail
cd "$(dirname "$0")/.."
N=${LARGE_GRAPHS:-40000}
SMALL=$((N / 10))
TMP=$(mktemp -d "${TMPDIR:-/tmp}/augloader-large-XXXXXX")
CG=/sys/fs/cgroup/memory/augloader-bench-$$
cleanup() { [ -n "${PID:-}" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rmdir "$CG" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
B=bin
# Every daemon: NodeSam, batches in flight within 256 MiB, no PageRank cache
# (NodeSam has no use for it): with --cache-limit 1GiB the process holds
# about 1.4 GiB (docs/deploy.md, "Sizing the caches").
COMMON="--policy nodesam --seed 3 --memory-budget 256MiB --ppr-cache 0"

for n in "$SMALL" "$N"; do
  "$B"/shardconv synth --like ogbg-ppa --graphs "$n" --seed 1 --out "$TMP/in-$n/ogbg_ppa" 2>/dev/null
  in_bytes=$(du -sb "$TMP/in-$n" | cut -f1)
  sync
  /usr/bin/time -f "%e %M" -o "$TMP/time" "$B"/shardconv convert -q -i "$TMP/in-$n/ogbg_ppa" -o "$TMP/s-$n"
  read -r secs rss <"$TMP/time"
  shard_bytes=$(du -sb "$TMP/s-$n" | cut -f1)
  echo "RESULT kind=convert graphs=$n input_bytes=$in_bytes shard_bytes=$shard_bytes convert_s=$secs rss_kib=$rss"
  rm -rf "$TMP/in-$n"
done

cgroup=0
if mkdir "$CG" 2>/dev/null && echo $((2 << 30)) >"$CG/memory.limit_in_bytes"; then
  cgroup=1
else
  echo "large: no cgroup v1 memory group could be made at $CG: the limited run is not confined"
fi

# serve NAME SHARDS CGROUP? ARGS...: one daemon, time to its first batch,
# then epochs 0 and 1 read whole.
serve() {
  local name=$1 shards=$2 incg=$3
  shift 3
  local sock="$TMP/$name.sock" t0 t1
  t0=$(date +%s.%N)
  if [ "$incg" = 1 ]; then
    sh -c "echo \$\$ > $CG/cgroup.procs; exec $B/augloader serve --shards $shards --socket $sock $COMMON $*" >"$TMP/$name.ready" 2>"$TMP/$name.log" &
  else
    "$B"/augloader serve --shards "$shards" --socket "$sock" $COMMON "$@" >"$TMP/$name.ready" 2>"$TMP/$name.log" &
  fi
  PID=$!
  until grep -q '"ready":true' "$TMP/$name.ready" 2>/dev/null; do kill -0 "$PID" || { cat "$TMP/$name.log"; exit 1; }; sleep 0.02; done
  "$B"/augloader fetch --socket "$sock" --epoch 0 --count 1 >/dev/null
  t1=$(date +%s.%N)
  local first
  first=$(echo "$t1 - $t0" | bc -l)
  if [ "${FIRST_ONLY:-0}" = 1 ]; then
    "$B"/augloader fetch --socket "$sock" --epoch 0 --count 1 --json >"$TMP/$name.e1"
  else
    "$B"/augloader fetch --socket "$sock" --epoch 0 --json >"$TMP/$name.e0"
    "$B"/augloader fetch --socket "$sock" --epoch 1 --json >"$TMP/$name.e1"
  fi
  local hwm
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status")
  kill "$PID"
  wait "$PID" || true
  PID=
  python3 - "$TMP/$name.e1" "$name" "$first" "$hwm" "$incg" "$CG" <<'PY'
import json, sys
e, name, first, hwm, incg, cg = sys.argv[1:]
d = json.load(open(e))
cgpeak = int(open(cg + "/memory.max_usage_in_bytes").read()) if incg == "1" else 0
print(f"RESULT kind=serve name={name} graphs={d['graphs']} epoch_s={d['seconds']:.3f} graphs_per_s={d['graphs'] / max(d['seconds'], 1e-9):.0f} "
      f"first_batch_s={float(first):.3f} rss_kib={hwm} cgroup_peak_bytes={cgpeak} shuffle={d['config'].get('shuffle', 'global')}")
PY
  grep -o 'msg="--shuffle[^"]*"' "$TMP/$name.log" | head -1 || true
}

serve limited "$TMP/s-$N" "$cgroup" --cache-limit 1GiB
shuffle=$(python3 -c "import json; print(json.load(open('$TMP/limited.e1'))['config'].get('shuffle', 'global'))")
serve cached "$TMP/s-$N" 0 --shuffle "$shuffle"
for n in "$SMALL" "$N"; do
  for run in 1 2 3; do
    FIRST_ONLY=1 serve "start-$n-$run" "$TMP/s-$n" 0 --cache-limit 1GiB --shuffle "$shuffle" | sed "s/kind=serve/kind=start size=$n/"
  done
done
