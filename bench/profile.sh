#!/usr/bin/env bash
# Where the headline's time goes (#68), saved as bench/results/profile.txt
# (bench/report renders it beside the headline): the trainer's side under
# cProfile (bench/python_profile.py: AugloaderDataset(pyg=True) over
# shared memory, a NodeSam COLLAB epoch) and the daemon's loader and
# encoder under pprof on one core (the COLLAB epoch benchmark's encode
# stage, samples under loader. and server. only: not the conversion its
# setup runs). Needs the real COLLAB and .venv-peers.
# Usage: bash bench/profile.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
OUT=${1:-bench/results/profile.txt}
. bench/collab.sh
collab_shards profile
BENCH='BenchmarkCOLLABEpoch/policy=nodesam/workers=1/stage=encode$'
{
	echo "# bench/profile.sh at $(git rev-parse --short HEAD), $(date -u +%F), $(nproc) cores, idle but for the run: .venv-peers/bin/python bench/python_profile.py (cProfile, 5 epochs after a first, each function's own time); $GO test -run XXX -bench '$BENCH' -benchtime 30x -cpuprofile ./bench, then go tool pprof -top -focus 'augloader/(loader|server)\\.' (flat time of the top functions)."
	.venv-peers/bin/python bench/python_profile.py --bin bin --shards "$TMP/collab.shards" --workdir "$TMP"
	"$GO" test -run XXX -bench "$BENCH" -benchtime 30x -cpuprofile "$TMP/cpu.prof" -o "$TMP/bench.test" ./bench >/dev/null
	"$GO" tool pprof -top -nodecount 12 -focus 'augloader/(loader|server)\.' "$TMP/bench.test" "$TMP/cpu.prof" 2>/dev/null |
		awk '$1 ~ /^[0-9.]+(ms|s)$/ && $2 ~ /%$/ { name = $6; sub(/^github.com\/augloader\/augloader\//, "", name); printf "RESULT kind=daemon-profile func=%s flat=%s share=%s\n", name, $1, $2 }'
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
cat "$OUT"
