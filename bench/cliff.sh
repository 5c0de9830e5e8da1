#!/usr/bin/env bash
# The cache cliff of issue #47: a COLLAB-shaped set of 5,000 graphs
# (shardconv synth --seed 1) in one default shard (5 pages), served with
# --policy nodesam --shuffle window:4 --memory-budget 64MiB --ppr-cache 0,
# under --cache-limit LIMIT and unlimited; one epoch (0) fetched over the
# socket. Prints a RESULT line per run: the epoch's seconds, the page
# loads (augloader_shard_cache_loads_total; each page once is the fewest
# any cache can do) and the pages shrunk instead of dropped (compactions,
# of which trims shrunk by graphs still needed).
#
# Usage: bash bench/cliff.sh [BIN] [LIMIT] [RUNS]   (BIN default bin/, LIMIT
# 64MiB, RUNS 1: each run is one limited and one unlimited daemon, in turn)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-bin}
LIMIT=${2:-64MiB}
RUNS=${3:-1}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$B"/shardconv synth --like COLLAB --graphs 5000 --seed 1 --out "$TMP/tu" >/dev/null
"$B"/shardconv convert -q -i "$TMP/tu" -o "$TMP/shards"
pages=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(sum(len(s['batches']) for s in m['shards']))" "$TMP/shards/manifest.json")
run() {
	local label=$1 port=$2
	shift 2
	rm -f "$TMP/s.sock"
	"$B"/augloader serve --shards "$TMP/shards" --socket "$TMP/s.sock" --policy nodesam --shuffle window:4 \
		--memory-budget 64MiB --ppr-cache 0 --metrics "127.0.0.1:$port" "$@" >"$TMP/serve.log" 2>&1 &
	local pid=$!
	for _ in $(seq 200); do [ -S "$TMP/s.sock" ] && break; sleep 0.05; done
	local t0 t1
	t0=$(date +%s.%N)
	"$B"/augloader fetch --socket "$TMP/s.sock" --epoch 0 >/dev/null
	t1=$(date +%s.%N)
	local metrics loads compactions trims
	metrics=$(curl -s "127.0.0.1:$port/metrics")
	loads=$(awk '/^augloader_shard_cache_loads_total/{print $2}' <<<"$metrics")
	compactions=$(awk '/^augloader_shard_cache_compactions_total/{print $2}' <<<"$metrics")
	trims=$(awk '/^augloader_shard_cache_trims_total/{print $2}' <<<"$metrics")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	echo "RESULT run=$label pages=$pages epoch_s=$(echo "$t1 - $t0" | bc) loads=${loads:-0} compactions=${compactions:-0} trims=${trims:-0}"
}
for _ in $(seq "$RUNS"); do
	run "limit-$LIMIT" 19391 --cache-limit "$LIMIT"
	run unlimited 19392
done
