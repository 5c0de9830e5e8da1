#!/usr/bin/env bash
# Python client vs PyG on the real COLLAB, and the PyG peers on the real
# REDDIT-BINARY (see bench/python_client.py).
# Usage: bash bench/python_collab.sh [OUT.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/collab.sh
collab_shards python_collab
.venv-peers/bin/python bench/python_client.py --bin bin --shards "$TMP/collab.shards" --epochs 5 --workdir "$TMP" --tu "$TMP/COLLAB" ${1:+--json "$1"}
RB=../shared/datasets/tu/REDDIT-BINARY/REDDIT-BINARY.zip
if [ -f "$RB" ]; then
	bin/shardconv convert -q -i "$RB" -o "$TMP/rb.shards"
	.venv-peers/bin/python bench/python_client.py --bin bin --shards "$TMP/rb.shards" --epochs 3 --peers-only --prefix REDDIT-BINARY/ ${1:+--json "$1"}
fi
