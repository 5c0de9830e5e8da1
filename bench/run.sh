#!/usr/bin/env bash
# make bench: runs every benchmark behind docs/bench.md, saving each step's
# output and exact command under $BENCHOUT (default bench/out), then
# bench/report rewrites docs/bench.md and its PNG figures from them.
# Needs the real COLLAB and REDDIT-BINARY in ../shared/datasets and
# .venv-bench and .venv-peers (make .venv-bench/.stamp .venv-peers/.stamp), .venv-mosaic and s3proxy (make
# .venv-mosaic/.stamp s3proxy: make bench does both); root for the throttled-link rows of
# bench/scaleout.sh (skipped otherwise). About an hour on 2 cores (60 minutes at
# 539c18f). Step profile rewrites bench/results/profile.txt (bench/profile.sh:
# where the headline's time goes, rendered beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${BENCHOUT:-bench/out}
COUNT=${BENCHCOUNT:-4}
GO=${GO:-go}
rm -rf "$OUT"
mkdir -p "$OUT"
# The commit measured; -dirty when tracked files other than the page and
# figures a previous run wrote differ from it.
{
	git rev-parse --short HEAD 2>/dev/null || echo unknown
} | tr -d '\n' >"$OUT/commit.txt"
git diff --quiet HEAD -- . ':!docs/bench.md' ':!docs/*.png' 2>/dev/null || printf -- '-dirty' >>"$OUT/commit.txt"
# quote prints a command as it can be pasted into a shell.
quote() {
	local out=() a
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./=:+,-]+$ ]]; then out+=("$a"); else out+=("'$a'"); fi
	done
	echo "${out[*]}"
}
step() {
	local name=$1
	shift
	printf '%s\t%s\n' "$name" "$(quote "$@")" >>"$OUT/commands.tsv"
	echo "== bench $name: $*" >&2
	"$@" | tee "$OUT/$name.txt"
}
step policies "$GO" test -run XXX -bench 'BenchmarkPolicies|BenchmarkBuildIndex' -benchmem -count "$COUNT" -benchtime 0.5s ./aug
step scaling "$GO" test -run XXX -bench BenchmarkScaling -benchtime 0.5s -timeout 30m ./aug
step collate "$GO" test -run XXX -bench BenchmarkCoalesce -count "$COUNT" ./aug
step epoch "$GO" test -run XXX -bench 'Epoch|Limit' -benchtime 3x -timeout 30m ./bench
step python bash bench/python_collab.sh "$OUT/python.jsonl"
step profile bash bench/profile.sh
step convert bash bench/convert_collab.sh
step scaleout bash bench/scaleout.sh
step molecules bash bench/molecules.sh
step tensors bash bench/python_tensors.sh
step twins bash bench/python_twins.sh
step litdata bash bench/litdata.sh
step shuffle bash bench/shuffle.sh
step large bash bench/large.sh
step cliff bash bench/cliff.sh bin 64MiB 3
step s3 bash bench/s3.sh
# bench/report is a module of its own (its plotting library stays out of
# the library's go.mod).
ROOT=$PWD
(cd bench/report && "$GO" run . -in "$ROOT/$OUT" -docs "$ROOT/docs" -results "$ROOT/bench/results")
