#!/usr/bin/env bash
# Shards in object storage (issue 47): an ogbg-ppa-shaped synthetic set
# (S3_GRAPHS graphs, default 40,000, as bench/large.sh) served with
# --cache-limit 1GiB from the local folder, from a loopback S3-compatible
# server (s3proxy, `make s3proxy`, on the machine's java), and from that
# server behind bench/latencyproxy adding 20 ms to every request. NodeSam
# over the Unix socket; epoch 0 warms, epoch 1 is timed. Prints a RESULT
# line per run: graphs/s and seconds of epoch 1, time from starting the
# daemon to its first batch, the GETs and bytes fetched during epoch 1
# (augloader_objstore_*) and the GETs from the start through epoch 1
# (gets_all), and page_bytes, what the epoch's pages come to read once
# each (the page map's lengths). Then the 20 ms case with --disk-cache: a
# daemon that fills it, and one started again on it.
#
# Then the peer, MosaicML Streaming (bench/peers/mosaic_s3.py in
# .venv-mosaic, make .venv-mosaic/.stamp): the same graphs packed as MDS
# shards (uncompressed and zstd) on the same server, read through
# bench/latencyproxy with no delay, which counts the GETs and bytes, with a
# cache_limit of half what the MDS set takes in its local cache (raw shards,
# and their zips when compressed; MOSAIC_CACHE_FRACTION; at least the
# four largest shards Streaming insists on), at each DataLoader worker
# count of MOSAIC_WORKERS (default 0 1 2), shuffling in blocks of about a
# quarter of the cache (shuffle_block_size; Streaming's default block spans
# the whole set and refetches a shard for most samples under such a limit,
# mosaicml/streaming#339: one run with it, epoch 0 cut after MOSAIC_CAP_S
# seconds, partial=1); a RESULT line each, its set's size in a
# kind=mosaic-set line. MOSAIC=0 skips it.
#
# Usage: bash bench/s3.sh   (S3_GRAPHS=4000 for a quick run; S3_BIN=DIR measures the binaries in DIR, default bin/)
#
# Several builds in one run (bench/beside.sh): S3_BUILDS="new=bin old=DIR"
# measures each row for each build in turn, S3_ROUNDS times (default 1), the
# builds alternating row by row so that the machine's drift falls on both;
# each RESULT line then leads with build=LABEL round=R. S3_ROWS names the
# rows to run (default: local s3 s3-20ms s3-20ms-disk s3-20ms-disk-restart;
# the restart row needs the disk row before it).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${S3_GRAPHS:-40000}
B=${S3_BIN:-bin}
if [ -n "${S3_BUILDS:-}" ]; then B=${S3_BUILDS#*=}; B=${B%% *}; fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/augloader-s3-XXXXXX")
. bench/s3lib.sh

"$B"/shardconv synth --like ogbg-ppa --graphs "$N" --seed 1 --out "$TMP/in/ogbg_ppa" 2>/dev/null
"$B"/shardconv convert -q -i "$TMP/in/ogbg_ppa" -o "$TMP/s"
MOSAIC=${MOSAIC:-1}
MPY=.venv-mosaic/bin/python
if [ "$MOSAIC" = 1 ]; then
  [ -f .venv-mosaic/.stamp ] || make --no-print-directory .venv-mosaic/.stamp >&2
  for c in none zstd; do
    "$MPY" bench/peers/mosaic_s3.py write "$TMP/in/ogbg_ppa" "$TMP/data/bench/ppa-mds-$c" --compression "$c" >"$TMP/mds-$c.json"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"RESULT kind=mosaic-set compression={d['compression']} graphs={d['graphs']} bytes={d['bytes']} local_bytes={d['local_bytes']} shards={d['shards']}\")" "$TMP/mds-$c.json"
  done
fi
rm -rf "$TMP/in"
page_bytes=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(sum(p['length'] for s in m['shards'] for p in s['page_map']['pages']))" "$TMP/s/manifest.json")
# The server's folder holds the same files (hard links).
mkdir -p "$TMP/data/bench"
cp -al "$TMP/s" "$TMP/data/bench/ppa"

start_s3proxy "$TMP/data"
go build -o "$TMP/latencyproxy" ./bench/latencyproxy
LPORT=$(free_port)
"$TMP/latencyproxy" -listen "127.0.0.1:$LPORT" -target "http://127.0.0.1:$S3PORT" -delay 20ms &
PIDS+=($!)
until curl -s -o /dev/null "http://127.0.0.1:$LPORT"; do sleep 0.1; done

COMMON="--policy nodesam --seed 3 --memory-budget 256MiB --ppr-cache 0 --cache-limit 1GiB"
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }

# serve NAME SHARDS ENDPOINT [FLAG...]
serve() {
  local name=$1 shards=$2 endpoint=$3 mport sock="$TMP/$1.sock" t0 t1 pid
  shift 3
  mport=$(free_port)
  t0=$(date +%s.%N)
  AWS_ENDPOINT_URL=$endpoint "$B"/augloader serve --shards "$shards" --socket "$sock" --metrics "127.0.0.1:$mport" $COMMON "$@" \
    >"$TMP/$name.ready" 2>"$TMP/$name.log" &
  pid=$!
  until grep -q '"ready":true' "$TMP/$name.ready" 2>/dev/null; do kill -0 "$pid" || { cat "$TMP/$name.log"; exit 1; }; sleep 0.02; done
  "$B"/augloader fetch --socket "$sock" --epoch 0 --count 1 >/dev/null
  t1=$(date +%s.%N)
  "$B"/augloader fetch --socket "$sock" --epoch 0 >/dev/null
  local gets0 bytes0 gets1 bytes1
  gets0=$(metric "$mport" augloader_objstore_gets_total); bytes0=$(metric "$mport" augloader_objstore_bytes_total)
  "$B"/augloader fetch --socket "$sock" --epoch 1 --json >"$TMP/$name.e1"
  gets1=$(metric "$mport" augloader_objstore_gets_total); bytes1=$(metric "$mport" augloader_objstore_bytes_total)
  kill "$pid"; wait "$pid" || true
  python3 - "$TMP/$name.e1" "$name" "$(echo "$t1 - $t0" | bc -l)" "${gets0:-0}" "${gets1:-0}" "${bytes0:-0}" "${bytes1:-0}" "$page_bytes" <<'PY'
import json, sys
e, name, first, g0, g1, b0, b1, pages = sys.argv[1:]
d = json.load(open(e))
print(f"RESULT kind=s3 name={name} graphs={d['graphs']} epoch_s={d['seconds']:.3f} graphs_per_s={d['graphs'] / max(d['seconds'], 1e-9):.0f} "
      f"first_batch_s={float(first):.3f} gets={int(float(g1)) - int(float(g0))} bytes={int(float(b1)) - int(float(b0))} page_bytes={pages} "
      f"gets_all={int(float(g1))} "
      f"shuffle={d['config'].get('shuffle', 'global')}")
PY
}

# row NAME: one row for the build in $B, its disk cache its own.
row() {
  local cache="$TMP/disk-cache${LABEL:+-$LABEL}"
  case $1 in
  local) serve local "$TMP/s" "" ;;
  s3) serve s3 s3://bench/ppa "http://127.0.0.1:$S3PORT" ;;
  s3-20ms) serve s3-20ms s3://bench/ppa "http://127.0.0.1:$LPORT" ;;
  # --disk-cache: a daemon that fills it (epoch 1 from disk), then one
  # started again on it (its first batch and every epoch from disk).
  s3-20ms-disk) rm -rf "$cache"; serve s3-20ms-disk s3://bench/ppa "http://127.0.0.1:$LPORT" --disk-cache "$cache" ;;
  s3-20ms-disk-restart) serve s3-20ms-disk-restart s3://bench/ppa "http://127.0.0.1:$LPORT" --disk-cache "$cache" ;;
  *) echo "bench/s3.sh: S3_ROWS: no row named $1" >&2; exit 2 ;;
  esac
}
ROWS=${S3_ROWS:-local s3 s3-20ms s3-20ms-disk s3-20ms-disk-restart}
if [ -z "${S3_BUILDS:-}" ]; then
  for r in $ROWS; do row "$r"; done
else
  for round in $(seq 1 "${S3_ROUNDS:-1}"); do
    for r in $ROWS; do
      for build in $S3_BUILDS; do
        LABEL=${build%%=*} B=${build#*=}
        row "$r" | sed "s/^RESULT /RESULT build=$LABEL round=$round /"
      done
    done
  done
  B=${S3_BUILDS#*=}; B=${B%% *}
fi

if [ "$MOSAIC" = 1 ]; then
  CPORT=$(free_port)
  "$TMP/latencyproxy" -listen "127.0.0.1:$CPORT" -target "http://127.0.0.1:$S3PORT" -delay 0 &
  PIDS+=($!)
  until curl -s -o /dev/null "http://127.0.0.1:$CPORT"; do sleep 0.1; done
  for c in none zstd; do
    # The cache_limit, and a py1e shuffle block of about a quarter of it
    # in samples (as the daemon's default window fills about a quarter of
    # --cache-limit).
    read -r limit block < <(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=max(int(d['local_bytes'] * float(sys.argv[2])), d['min_cache_limit']); print(l, max(1, d['graphs'] * l // 4 // d['local_bytes']))" "$TMP/mds-$c.json" "${MOSAIC_CACHE_FRACTION:-0.5}")
    runs=()
    for w in ${MOSAIC_WORKERS:-0 1 2}; do runs+=("$w $block 0"); done
    # Streaming's default block (larger than the set) under the same
    # limit: epoch 0 only, cut after MOSAIC_CAP_S seconds (default 60).
    first=$(set -- ${MOSAIC_WORKERS:-0}; echo "$1")
    runs+=("$first 0 ${MOSAIC_CAP_S:-60}")
    for r in "${runs[@]}"; do
      read -r w b cap <<<"$r"
      args=(--cache-limit "$limit" --workers "$w")
      [ "$b" = 0 ] || args+=(--shuffle-block-size "$b")
      [ "$cap" = 0 ] || args+=(--max-seconds "$cap")
      # boto3 asks for response checksums by default; s3proxy 2.7.0 answers
      # NotImplemented to that header, so only when an operation requires it.
      S3_ENDPOINT_URL="http://127.0.0.1:$CPORT" AWS_RESPONSE_CHECKSUM_VALIDATION=when_required AWS_REQUEST_CHECKSUM_CALCULATION=when_required timeout -k 10 "${MOSAIC_TIMEOUT_S:-600}" "$MPY" bench/peers/mosaic_s3.py read "s3://bench/ppa-mds-$c" --name "mosaic-$c" \
        --stats "http://127.0.0.1:$CPORT/_latencyproxy/stats" "${args[@]}" 2>"$TMP/mosaic.log" |
        sed "s/\$/ compression=$c/" ||
        # A failed run is a result too: two DataLoader workers were seen to
        # fail now and then with an IndexError inside Streaming's MDS decode,
        # and once to hang (MOSAIC_TIMEOUT_S, default 600, ends it: "timeout").
        echo "RESULT kind=mosaic name=mosaic-$c workers=$w compression=$c failed=$({ grep -E '^[A-Za-z.]*(Error|Exception)' "$TMP/mosaic.log" || echo timeout_or_killed; } | tail -1 | tr -c 'A-Za-z0-9.:_-' _ | cut -c1-120)"
    done
  done
fi
