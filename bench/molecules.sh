#!/usr/bin/env bash
# Molecule benchmarks (issue #26), on synthetic OGB folders that shardconv
# synth writes (no download):
#  1. conversion of an ogbg-molpcba-sized folder (437,929 molecules, 128
#     tasks; MOLPCBA_GRAPHS to shrink it) against `gzip -dc` of its csv.gz
#     files to /dev/null, the floor of any reader of them (best of 3 each,
#     page cache warm), and the conversion's peak RSS and CPU time;
#  2. a NodeSam epoch with edge features to Python in PyG's layout against
#     PyG's DataLoader over OGB's PygGraphPropPredDataset doing dropout_edge
#     (bench/python_molecules.py; PY_GRAPHS molecules, default 40,000: PyG
#     processes the folder in memory first).
# Prints RESULT lines for bench/report.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ ./cmd/...
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
N=${MOLPCBA_GRAPHS:-437929}
bin/shardconv synth --like ogbg-molpcba --graphs "$N" --seed 1 --out "$TMP/molpcba"
IN="$TMP/molpcba"
files=$(find "$IN" -name '*.csv.gz' | sort)
# shellcheck disable=SC2086
cat $files > /dev/null
# shellcheck disable=SC2086
gz_bytes=$(cat $files | wc -c)
# shellcheck disable=SC2086
raw_bytes=$(gzip -dc $files | wc -c)
best() { local b=999999; for _ in 1 2 3; do local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N); b=$(echo "$e - $s" | bc -l | awk -v b="$b" '{print ($1<b)?$1:b}'); done; echo "$b"; }
# shellcheck disable=SC2086
gzip_s=$(best gzip -dc $files)
conv() { rm -rf "$TMP/out"; bin/shardconv convert -q -i "$IN" -o "$TMP/out"; }
conv_s=$(best conv)
rm -rf "$TMP/out"
read -r rss cpu_s <<<"$( { /usr/bin/time -f '%M %U %S' bin/shardconv convert -q -i "$IN" -o "$TMP/out"; } 2>&1 | tail -1 | awk '{print $1, $2 + $3}')"
shard_bytes=$(du -sb "$TMP/out" | cut -f1)
cores=$(nproc)
printf 'molpcba-shaped folder: %d molecules, %d bytes of csv.gz (%d uncompressed)\n' "$N" "$gz_bytes" "$raw_bytes"
printf 'gzip -dc of its files:  %.3f s\n' "$gzip_s"
printf 'shardconv convert:      %.3f s (%.1fx gzip -dc), peak RSS %d MiB, CPU %s s on %d cores; shards %d bytes\n' \
	"$conv_s" "$(echo "$conv_s/$gzip_s" | bc -l)" $((rss / 1024)) "$cpu_s" "$cores" "$shard_bytes"
echo "RESULT kind=convert graphs=$N gz_bytes=$gz_bytes raw_bytes=$raw_bytes gzip_s=$gzip_s convert_s=$conv_s rss_kib=$rss cpu_s=$cpu_s cores=$cores shard_bytes=$shard_bytes"
rm -rf "$TMP/out" "$IN"
P=${PY_GRAPHS:-40000}
bin/shardconv synth --like ogbg-molpcba --graphs "$P" --seed 2 --out "$TMP/mol"
bin/shardconv convert -q -i "$TMP/mol" -o "$TMP/mol.shards"
PY=${PY:-.venv-bench/bin/python}
"$PY" bench/python_molecules.py --bin bin --ogb "$TMP/mol" --shards "$TMP/mol.shards" --epochs "${PY_EPOCHS:-3}"
