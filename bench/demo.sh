#!/usr/bin/env bash
# The quick-start demo on an embedded default: generate a seeded synthetic
# COLLAB-shaped dataset, convert it to shards, verify them, serve a NodeSam
# epoch over a Unix socket, consume it with `augloader fetch`, stop the
# server, and print the summaries.
#
# It owns only what it writes under $DEMO_DIR (default demo/): tu/, shards/,
# the socket and its .txt/.log summaries. A rerun replaces those and nothing
# else, so folders of your own beside them (the README's demo/mutag and
# demo/folds) are left alone. `bash bench/demo.sh clean` removes the demo's
# outputs (make clean).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
DEMO=${DEMO_DIR:-demo}
GRAPHS=${DEMO_GRAPHS:-500}
SEED=${DEMO_SEED:-0}
outputs=(tu shards augloader.sock serve.log first.txt again.txt)
clean() {
  for o in "${outputs[@]}"; do rm -rf "${DEMO:?}/$o"; done
  rmdir "$DEMO" 2>/dev/null || true # only when nothing else is in it
}
if [ "${1:-}" = clean ]; then
  clean
  exit 0
fi
clean
mkdir -p "$DEMO"
echo "== synth: $GRAPHS COLLAB-shaped graphs, seed $SEED"
"$BIN/shardconv" synth --like COLLAB --graphs "$GRAPHS" --seed "$SEED" --out "$DEMO/tu"
echo "== convert"
"$BIN/shardconv" convert --input "$DEMO/tu" --out "$DEMO/shards"
echo "== verify"
"$BIN/shardconv" verify "$DEMO/shards"
echo "== stats"
"$BIN/shardconv" stats "$DEMO/shards"
echo "== serve a NodeSam epoch on $DEMO/augloader.sock and consume it"
"$BIN/augloader" serve --shards "$DEMO/shards" --socket "$DEMO/augloader.sock" --policy nodesam --seed "$SEED" \
  2> "$DEMO/serve.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$DEMO/augloader.sock" ] && break; sleep 0.05; done
"$BIN/augloader" fetch --socket "$DEMO/augloader.sock" --epoch 0 | tee "$DEMO/first.txt"
"$BIN/augloader" fetch --socket "$DEMO/augloader.sock" --epoch 0 > "$DEMO/again.txt"
kill -TERM "$SERVER"
wait "$SERVER"
trap - EXIT
echo "== server log"
cat "$DEMO/serve.log"
first=$(grep sha256 "$DEMO/first.txt")
again=$(grep sha256 "$DEMO/again.txt")
if [ "$first" = "$again" ]; then
  echo "== the same request twice gave the same stream ($first)"
else
  echo "== determinism broken: $first vs $again" >&2
  exit 1
fi
cat <<NEXT
== next
  train GIN on the demo set, none against NodeSam (2-fold cross-validation, 3 epochs; a few minutes on
  two cores; needs the test venv's torch: make venv):
    .venv/bin/python examples/train_gin.py cv --shards $DEMO/shards --policies none,nodesam --folds 2 --epochs 3
  serve it yourself and read it from Python: README.md, "From make demo to a GIN run"
  where everything is: docs/map.md; the tests: make test
NEXT
