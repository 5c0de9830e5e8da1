#!/usr/bin/env bash
# The trainer's cost per batch on the real COLLAB: to_tensors on the CPU
# device in both layouts against PyG in the same layout (bench/python_tensors.py).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/collab.sh
collab_shards python_tensors
.venv-peers/bin/python bench/python_tensors.py --bin bin --shards "$TMP/collab.shards" --epochs 5 --workdir "$TMP"
