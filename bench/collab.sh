# Sourced by the benchmark steps on the real COLLAB: `collab_shards STEP
# [shardconv convert flags...]` unpacks ../shared's COLLAB_tu.tar.xz into a
# temporary folder $TMP (removed on exit) as $TMP/COLLAB and converts it to
# $TMP/collab.shards; without the dataset the step says so and exits 0.
collab_shards() {
	local step=$1
	shift
	SRC=../shared/datasets/tu/COLLAB/COLLAB_tu.tar.xz
	[ -f "$SRC" ] || { echo "$step: $SRC absent, skipping"; exit 0; }
	TMP=$(mktemp -d)
	trap 'rm -rf "$TMP"' EXIT
	xz -dc "$SRC" | tar -x -C "$TMP"
	bin/shardconv convert -q -i "$TMP/COLLAB" -o "$TMP/collab.shards" "$@"
}
