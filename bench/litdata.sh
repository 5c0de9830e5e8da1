#!/usr/bin/env bash
# LitData beside augloader on the real COLLAB (#68): conversion, every
# StreamingDataLoader configuration, the fastest paired with
# AugloaderDataset(pyg=True), and the feature table's checks (resume,
# a flipped byte, torchrun without a rank argument); see
# bench/peers/litdata_collab.py. Needs .venv-peers (make .venv-peers/.stamp).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/collab.sh
collab_shards litdata
.venv-peers/bin/python bench/peers/litdata_collab.py --bin bin --shards "$TMP/collab.shards" --workdir "$TMP"
