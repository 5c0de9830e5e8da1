#!/usr/bin/env bash
# The trainer's cost per batch on the real COLLAB: to_tensors on the CPU
# device in both layouts against PyG in the same layout (bench/python_tensors.py).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=../shared/datasets/tu/COLLAB/COLLAB_tu.tar.xz
[ -f "$SRC" ] || { echo "python_tensors: $SRC absent, skipping"; exit 0; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
xz -dc "$SRC" | tar -x -C "$TMP"
bin/shardconv convert -q -i "$TMP/COLLAB" -o "$TMP/collab.shards"
.venv-bench/bin/python bench/python_tensors.py --bin bin --shards "$TMP/collab.shards" --epochs 5 --workdir "$TMP"
