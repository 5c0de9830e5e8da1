#!/usr/bin/env bash
# Two views of every graph (GraphCL twins) into PyG Batches on the real
# COLLAB and REDDIT-BINARY: augloader against GraphCL's augmentations in a
# PyG Dataset.get (bench/python_twins.py).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/collab.sh
collab_shards python_twins
.venv-peers/bin/python bench/python_twins.py --bin bin --shards "$TMP/collab.shards" --epochs 3
RB=../shared/datasets/tu/REDDIT-BINARY/REDDIT-BINARY.zip
if [ -f "$RB" ]; then
	bin/shardconv convert -q -i "$RB" -o "$TMP/rb.shards"
	.venv-peers/bin/python bench/python_twins.py --bin bin --shards "$TMP/rb.shards" --epochs 2 --batch-sizes 128 --prefix REDDIT-BINARY/
fi
