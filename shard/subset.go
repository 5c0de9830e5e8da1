package shard

import "unsafe"

// Copying a page's graphs into a page of their own: the cache's
// compaction (shard/internal/pagecache) keeps what streams still need.

// subset copies rows of b (in order) into a batch of their own, in Go
// memory, and returns it with its bytes.
func (b *batch) subset(rows []int) (batch, int64) {
	var n batch
	var bytes int64
	pick := func(vals []int32) []int32 {
		if vals == nil {
			return nil
		}
		out := make([]int32, len(rows))
		for i, r := range rows {
			out[i] = vals[r]
		}
		bytes += 4 * int64(len(out))
		return out
	}
	n.ids = make([]int64, len(rows))
	for i, r := range rows {
		n.ids[i] = b.ids[r]
	}
	bytes += 8 * int64(len(rows))
	n.labels, n.numNodes = pick(b.labels), pick(b.numNodes)
	n.edgeOff, n.edges = gather(b.edgeOff, b.edges, rows, &bytes)
	// featOff delimits codes (format 2's one-hot) or x, never both.
	if b.codes != nil {
		n.featOff, n.codes = gather(b.featOff, b.codes, rows, &bytes)
	} else {
		n.featOff, n.x = gather(b.featOff, b.x, rows, &bytes)
	}
	n.elOff, n.edgeLabels = gather(b.elOff, b.edgeLabels, rows, &bytes)
	n.tgtOff, n.targets = gather(b.tgtOff, b.targets, rows, &bytes)
	n.exOff, n.edgeX = gather(b.exOff, b.edgeX, rows, &bytes)
	n.ncOff, n.nodeCat = gatherCodes(b.ncOff, b.nodeCat, rows, &bytes)
	n.ecOff, n.edgeCat = gatherCodes(b.ecOff, b.edgeCat, rows, &bytes)
	if b.v4 != nil {
		n.v4 = b.v4.subset(rows, &bytes)
	}
	return n, bytes
}

// gather copies the value ranges off[r]:off[r+1] of rows into new values
// with new offsets from 0 (nil, nil for a column without offsets).
func gather[T int32 | float32 | uint8 | uint16 | int8 | float64](off []int32, vals []T, rows []int, bytes *int64) ([]int32, []T) {
	if off == nil {
		return nil, nil
	}
	out := make([]int32, len(rows)+1)
	for i, r := range rows {
		out[i+1] = out[i] + off[r+1] - off[r]
	}
	nv := make([]T, out[len(rows)])
	for i, r := range rows {
		copy(nv[out[i]:out[i+1]], vals[off[r]:off[r+1]])
	}
	var z T
	*bytes += 4*int64(len(out)) + int64(len(nv))*int64(unsafe.Sizeof(z))
	return out, nv
}

// gatherCodes is gather for a column of codes of any width.
func gatherCodes(off []int32, c Codes, rows []int, bytes *int64) ([]int32, Codes) {
	switch {
	case off == nil:
		return nil, Codes{}
	case c.U8 != nil:
		o, v := gather(off, c.U8, rows, bytes)
		return o, Codes{U8: v}
	case c.U16 != nil:
		o, v := gather(off, c.U16, rows, bytes)
		return o, Codes{U16: v}
	}
	o, v := gather(off, c.I32, rows, bytes)
	return o, Codes{I32: v}
}
