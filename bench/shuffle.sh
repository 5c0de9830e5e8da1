#!/usr/bin/env bash
# Shuffle quality on the real COLLAB (bench/shuffle): the global permutation
# against windows of 1..32 shards, the set cut into shards of about 256 KiB.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/collab.sh
collab_shards shuffle --shard-size 262144
go run ./bench/shuffle --shards "$TMP/collab.shards" --batch-size 32 --windows 1,2,4,8,16,32 --epochs 5 2>&1
