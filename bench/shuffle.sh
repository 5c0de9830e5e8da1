#!/usr/bin/env bash
# Shuffle quality on the real COLLAB (bench/shuffle): the global permutation
# against windows of 1..32 shards, the set cut into shards of about 256 KiB.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=../shared/datasets/tu/COLLAB/COLLAB_tu.tar.xz
[ -f "$SRC" ] || { echo "shuffle: $SRC absent, skipping"; exit 0; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
xz -dc "$SRC" | tar -x -C "$TMP"
bin/shardconv convert -q -i "$TMP/COLLAB" -o "$TMP/collab.shards" --shard-size 262144
go run ./bench/shuffle --shards "$TMP/collab.shards" --batch-size 32 --windows 1,2,4,8,16,32 --epochs 5 2>&1
