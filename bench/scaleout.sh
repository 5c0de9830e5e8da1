#!/usr/bin/env bash
# Scale-out measurements on the real COLLAB (docs/bench.md, issue #17):
#
#  1. Flight wire compression: an epoch's bytes on the wire and its time
#     with --wire-compression none, lz4 and zstd, on loopback and across a
#     veth link between two network namespaces throttled to 1 Gbit/s with
#     tbf (the kernel here has tbf and htb, no netem). The throttled rows
#     need root, `ip netns` and `tc`; without them they are skipped.
#  2. Scaling: a SubMix epoch from 1 daemon pinned to one core (taskset)
#     and from 2 daemons pinned to one core each, read together by one
#     client over loopback Flight; the ratio, and the stream's SHA-256 from
#     both, which must be equal.
#
# Prints one "RESULT kind=... k=v ..." line per measurement for bench/report.
# Usage: bash bench/scaleout.sh   (from make bench; needs bin/ built)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=../shared/datasets/tu/COLLAB/COLLAB_tu.tar.xz
[ -f "$SRC" ] || { echo "scaleout: $SRC absent, skipping"; exit 0; }
EPOCHS=${SCALEOUT_EPOCHS:-3}
TMP=$(mktemp -d)
NS_SRV=augbench-srv NS_CLI=augbench-cli
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip netns del "$NS_SRV" 2>/dev/null || true
	ip netns del "$NS_CLI" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT
xz -dc "$SRC" | tar -x -C "$TMP"
bin/shardconv convert -q -i "$TMP/COLLAB" -o "$TMP/collab.shards"
printf 'bench-token\n' >"$TMP/token"
BIN=$PWD/bin

# start NAME PREFIX ARGS...: runs `augloader serve` (PREFIX: a command
# such as `ip netns exec NS` or `taskset -c 0`, or `-`), waits for its
# readiness line and sets URL to its Flight address.
start() {
	local name=$1 prefix=$2
	shift 2
	local out="$TMP/$name.ready"
	if [ "$prefix" = - ]; then prefix=; fi
	# shellcheck disable=SC2086
	$prefix "$BIN/augloader" serve --shards "$TMP/collab.shards" --socket "$TMP/$name.sock" "$@" >"$out" 2>"$TMP/$name.log" &
	PIDS+=($!)
	for _ in $(seq 600); do
		if [ -s "$out" ]; then break; fi
		sleep 0.1
	done
	URL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["flight"])' "$out") ||
		{ echo "scaleout: $name did not start:"; cat "$TMP/$name.log"; exit 1; }
}
stop_all() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	PIDS=()
}

# epochs PREFIX ARGS...: fetches epochs 1..EPOCHS (epoch 0 first, not
# counted: it builds indexes) and prints "seconds bytes sha256" per epoch.
epochs() {
	local prefix=$1
	shift
	if [ "$prefix" = - ]; then prefix=; fi
	# shellcheck disable=SC2086
	$prefix "$BIN/augloader" fetch --epoch 0 "$@" --json >/dev/null
	for e in $(seq "$EPOCHS"); do
		# shellcheck disable=SC2086
		$prefix "$BIN/augloader" fetch --epoch "$e" "$@" --json |
			python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["seconds"], r["bytes"], r["batches_sha256"])'
	done
}

# summary KIND KEYS...: reads epochs' lines, prints the RESULT line.
summary() {
	python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin if l.strip()]
secs = [float(r[0]) for r in rows]
print("RESULT", " ".join(sys.argv[1:]), "epochs=%d" % len(rows), "median_s=%.4f" % statistics.median(secs),
      "best_s=%.4f" % min(secs), "bytes=%s" % rows[0][1], "sha256=" + ",".join(r[2] for r in rows))
' "$@"
}

echo "== wire compression, loopback (policy nodesam)" >&2
for comp in none lz4 zstd; do
	flag=()
	[ "$comp" = none ] || flag=(--wire-compression "$comp")
	start "c-$comp" - --flight grpc://127.0.0.1:0 --policy nodesam "${flag[@]}"
	epochs - --addr "$URL" | summary kind=compression link=loopback comp="$comp"
	stop_all
done

netns_ok=false
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null &&
	ip netns add "$NS_SRV" 2>/dev/null && ip netns add "$NS_CLI" 2>/dev/null; then
	if ip link add augb-srv netns "$NS_SRV" type veth peer name augb-cli netns "$NS_CLI" 2>/dev/null &&
		ip -n "$NS_SRV" addr add 10.232.0.1/24 dev augb-srv && ip -n "$NS_CLI" addr add 10.232.0.2/24 dev augb-cli &&
		ip -n "$NS_SRV" link set augb-srv up && ip -n "$NS_CLI" link set augb-cli up &&
		ip -n "$NS_SRV" link set lo up && ip -n "$NS_CLI" link set lo up &&
		ip netns exec "$NS_SRV" tc qdisc add dev augb-srv root tbf rate 1gbit burst 256kb latency 50ms; then
		netns_ok=true
	fi
fi
if $netns_ok; then
	echo "== wire compression, 1 Gbit/s link between namespaces (tbf)" >&2
	for comp in none lz4 zstd; do
		flag=()
		[ "$comp" = none ] || flag=(--wire-compression "$comp")
		start "t-$comp" "ip netns exec $NS_SRV" --flight grpc://10.232.0.1:0 --flight-allow-remote \
			--flight-token-file "$TMP/token" --policy nodesam "${flag[@]}"
		epochs "ip netns exec $NS_CLI" --addr "$URL" --token-file "$TMP/token" |
			summary kind=compression link=1gbit comp="$comp"
		stop_all
	done
else
	echo "RESULT kind=compression link=1gbit skipped=1 why=needs-root-netns-tc"
fi

echo "== scaling: SubMix, 1 daemon vs 2, each pinned to a core" >&2
cores=$(nproc)
if command -v taskset >/dev/null && [ "$cores" -ge 2 ]; then
	start s1 "taskset -c 0" --flight grpc://127.0.0.1:0 --policy submix:p=0.4 --workers 1 --wire-compression lz4
	epochs - --addr "$URL" | summary kind=scaling daemons=1
	stop_all
	# Two daemons, each told of both (--peers) so GetFlightInfo lists both;
	# the client reads the epoch from both together.
	p0=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	p1=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	peers=grpc://127.0.0.1:$p0,grpc://127.0.0.1:$p1
	start s2a "taskset -c 0" --flight "grpc://127.0.0.1:$p0" --peers "$peers" --policy submix:p=0.4 --workers 1 --wire-compression lz4
	start s2b "taskset -c 1" --flight "grpc://127.0.0.1:$p1" --peers "$peers" --policy submix:p=0.4 --workers 1 --wire-compression lz4
	epochs - --addr "grpc://127.0.0.1:$p0" --addr "grpc://127.0.0.1:$p1" | summary kind=scaling daemons=2
	stop_all
else
	echo "RESULT kind=scaling skipped=1 why=needs-taskset-and-2-cores"
fi
