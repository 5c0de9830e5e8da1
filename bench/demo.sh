#!/usr/bin/env bash
# The quick-start demo: generate a seeded synthetic COLLAB-shaped dataset,
# convert it to shards, verify them and print their statistics.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=bin
DEMO=${DEMO_DIR:-demo}
GRAPHS=${DEMO_GRAPHS:-500}
SEED=${DEMO_SEED:-0}
rm -rf "$DEMO"
mkdir -p "$DEMO"
echo "== synth: $GRAPHS COLLAB-shaped graphs, seed $SEED"
"$BIN/shardconv" synth --like COLLAB --graphs "$GRAPHS" --seed "$SEED" --out "$DEMO/tu"
echo "== convert"
"$BIN/shardconv" convert --input "$DEMO/tu" --out "$DEMO/shards"
echo "== verify"
"$BIN/shardconv" verify "$DEMO/shards"
echo "== stats"
"$BIN/shardconv" stats "$DEMO/shards"
