#!/usr/bin/env bash
# Shuffle quality on the real COLLAB (bench/shuffle), stored in class order
# as TU lists it: the global permutation against windows of pages (a shard
# file's record batches), by count and by size, and the order a daemon
# draws by default under a cache limit. Converted with the default
# --shard-size (one shard), cut into shards of about 256 KiB (the layout of
# the table before pages: its pages are smaller), and with the default
# --shard-size stored in a seeded random order (--order random:1).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/collab.sh
collab_shards shuffle
echo "## default --shard-size"
go run ./bench/shuffle --shards "$TMP/collab.shards" --label default --batch-size 32 --windows 1,2,4,4MiB,16MiB --limits 64MiB,16MiB --epochs 5 2>&1
rm -rf "$TMP/collab.shards"
bin/shardconv convert -q -i "$TMP/COLLAB" -o "$TMP/collab.shards" --shard-size 262144
echo "## --shard-size 256KiB"
go run ./bench/shuffle --shards "$TMP/collab.shards" --label 256KiB --batch-size 32 --windows 1,4,16,4MiB,16MiB --limits 64MiB,16MiB --epochs 5 2>&1
rm -rf "$TMP/collab.shards"
bin/shardconv convert -q -i "$TMP/COLLAB" -o "$TMP/collab.shards" --order random:1
echo "## --order random:1"
go run ./bench/shuffle --shards "$TMP/collab.shards" --label random --batch-size 32 --windows 1,2,4MiB,16MiB --limits 64MiB,16MiB --epochs 5 2>&1
