package ingest

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/augloader/augloader/shard"
)

// Entry packs a canonical undirected entry: u<<33 | v<<1 | dir, u < v local
// ids, dir = 1 when the file listed it as (v, u).
type Entry = uint64

// Pack is the entry of a listed edge (u, v) of local node ids.
func Pack(u, v int64) Entry {
	if u < v {
		return uint64(u)<<33 | uint64(v)<<1
	}
	return uint64(v)<<33 | uint64(u)<<1 | 1
}

// Canon sorts a graph's entries by (u, v) in O(n + entries) with two stable
// counting-sort passes, then merges duplicates. Buffers are reused.
type Canon struct {
	cnt, cur   []int32
	tmp        []Entry
	tmpL       []int32
	sorted     []Entry
	sortedL    []int32
	edges      []int32
	edgeLabels []int32
}

// Build returns graph's canonical edges (each undirected edge once as
// (u, v), u < v, sorted) and, with labels, the label of each (that of its
// first listing), from its entries (Pack); repeated entries and edges
// listed one way are counted in st. The slices are reused by the next call.
func (c *Canon) Build(n int32, keys []Entry, labels []int32, st *Stats) ([]int32, []int32) {
	m := len(keys)
	c.edges, c.edgeLabels = c.edges[:0], c.edgeLabels[:0]
	if m == 0 {
		return c.edges, nil
	}
	withL := labels != nil
	c.sorted = grow(c.sorted, m)
	if withL {
		c.sortedL = grow(c.sortedL, m)
	}
	if int(n) > 4*m+1024 {
		// Far more nodes than entries (a graph that declares millions of
		// nodes and lists a few edges): a comparison sort, in memory
		// proportional to the entries, where the counting passes need a
		// counter per node.
		c.sortByComparison(keys, labels, withL)
	} else {
		if !withL && c.presorted(n, keys, st) {
			return c.edges, nil
		}
		c.edges = c.edges[:0]
		c.tmp = grow(c.tmp, m)
		if withL {
			c.tmpL = grow(c.tmpL, m)
		}
		// Pass 1 by v into tmp, pass 2 by u into sorted: stable, so (u, v) order.
		c.countingPass(n, keys, labels, c.tmp, c.tmpL, 1, withL)
		c.countingPass(n, c.tmp, c.tmpL, c.sorted, c.sortedL, 33, withL)
	}

	for i := 0; i < m; {
		k := c.sorted[i] >> 1
		var dirs [2]int64
		j := i
		for ; j < m && c.sorted[j]>>1 == k; j++ {
			dirs[c.sorted[j]&1]++
		}
		st.Duplicates += max(dirs[0]-1, 0) + max(dirs[1]-1, 0)
		if dirs[0] == 0 || dirs[1] == 0 {
			st.Asymmetric++
		}
		c.edges = append(c.edges, int32(k>>32), int32(k&(1<<32-1)))
		if withL {
			c.edgeLabels = append(c.edgeLabels, c.sortedL[i])
		}
		i = j
	}
	if !withL {
		return c.edges, nil
	}
	return c.edges, c.edgeLabels
}

// presorted is Build's fast path for the layouts TU files use: every
// undirected edge listed in both directions, lines sorted by (first,
// second) or by (second, first). Then one direction's entries, in file
// order, are already sorted by (u, v) (call them S) and the other's are
// sorted by (v, u) (T). presorted checks that in one pass, writes S as the
// edges, and checks that every entry of T is in S, walking each row of S
// with a cursor (T visits a row's v in increasing order): O(n + entries)
// with sequential writes instead of two scatters. Anything else (a
// duplicate, an entry of T missing from S, another order) returns false
// with the stats untouched and Build takes the general path. Edge labels
// always take the general path, which picks the label of the first listing.
func (c *Canon) presorted(n int32, keys []Entry, st *Stats) bool {
	var (
		lastUV, lastVU [2]uint64 // per direction
		okUV, okVU     = [2]bool{true, true}, [2]bool{true, true}
		count          [2]int
	)
	first := [2]bool{true, true}
	for _, k := range keys {
		d := k & 1
		uv := k >> 1
		vu := uv<<32 | uv>>32
		if !first[d] {
			okUV[d] = okUV[d] && uv > lastUV[d]
			okVU[d] = okVU[d] && vu > lastVU[d]
		}
		first[d] = false
		lastUV[d], lastVU[d] = uv, vu
		count[d]++
	}
	// Both directions may qualify as S (a star, say); either may then fail.
	for s := range Entry(2) {
		if okUV[s] && okVU[1-s] && c.presortedAs(n, keys, s, count[s]) {
			st.Asymmetric += int64(count[s] - count[1-s])
			return true
		}
	}
	return false
}

// presortedAs writes the entries of direction s (S) as the edges and
// reports whether every entry of the other direction (T) is among them.
func (c *Canon) presortedAs(n int32, keys []Entry, s Entry, size int) bool {
	c.cnt = grow(c.cnt, int(n)+1)
	c.cur = grow(c.cur, int(n)+1)
	row, cur := c.cnt, c.cur
	clear(row)
	c.edges = grow(c.edges, 2*size)
	i := 0
	for _, k := range keys {
		if k&1 == s {
			u, v := int32(k>>33), int32(k>>1&(1<<32-1))
			c.edges[i], c.edges[i+1] = u, v
			i += 2
			row[u+1]++
		}
	}
	for u := int32(0); u < n; u++ {
		row[u+1] += row[u]
	}
	copy(cur, row)
	for _, k := range keys {
		if k&1 == s {
			continue
		}
		u, v := k>>33, int32(k>>1&(1<<32-1))
		p, end := cur[u], row[u+1]
		for p < end && c.edges[2*p+1] < v {
			p++
		}
		if p == end || c.edges[2*p+1] != v {
			return false
		}
		cur[u] = p + 1
	}
	return true
}

// sortByComparison writes keys into c.sorted (and labels into c.sortedL)
// ordered by (u, v), entries of one pair in their input order, as the
// counting passes do.
func (c *Canon) sortByComparison(keys []Entry, labels []int32, withL bool) {
	for i, j := range pairOrder(keys) {
		c.sorted[i] = keys[j]
		if withL {
			c.sortedL[i] = labels[j]
		}
	}
}

// pairOrder is the order of keys by undirected pair (u, v), the entries
// of one pair in their input order: what both passes of the counting sort
// give, by a comparison sort, in memory proportional to the entries.
func pairOrder(keys []Entry) []int32 {
	idx := make([]int32, len(keys))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortStableFunc(idx, func(a, b int32) int { return cmp.Compare(keys[a]>>1, keys[b]>>1) })
	return idx
}

func (c *Canon) countingPass(n int32, src []Entry, srcL []int32, dst []Entry, dstL []int32, shift uint, withL bool) {
	c.cnt = grow(c.cnt, int(n)+1)
	cnt := c.cnt
	clear(cnt)
	const mask = 1<<31 - 1
	for _, k := range src {
		cnt[(k>>shift)&mask]++
	}
	var sum int32
	for i := range cnt {
		cnt[i], sum = sum, sum+cnt[i]
	}
	for i, k := range src {
		b := (k >> shift) & mask
		dst[cnt[b]] = k
		if withL {
			dstL[cnt[b]] = srcL[i]
		}
		cnt[b]++
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// EdgeFeatures appends to g.EdgeCat.I32 and g.EdgeX the features of each
// canonical edge in g.Edges (Canon.Build's result for keys; first holds
// each edge's first listing) taken from that listing's row: rows[i] is
// key i's row, and codes and x hold nCodes codes and nX floats a row. A
// listing whose features differ from its edge's first is refused with
// conflict(u, v, row, firstRow)'s error: an undirected edge has one set of
// features, and nothing sums them or picks one.
func EdgeFeatures(g *shard.Graph, keys []Entry, rows, first, codes []int32, nCodes int, x []float32, nX int, conflict func(u, v, row, firstRow int32) error) error {
	for _, r := range first {
		g.EdgeCat.I32 = append(g.EdgeCat.I32, codes[int(r)*nCodes:(int(r)+1)*nCodes]...)
		g.EdgeX = append(g.EdgeX, x[int(r)*nX:(int(r)+1)*nX]...)
	}
	// Every listing against its edge's first (found by binary search in
	// the sorted pairs).
	for i, key := range keys {
		u, v := int32(key>>33), int32((key>>1)&(1<<32-1))
		r0, r := first[edgeIndex(g.Edges, u, v)], rows[i]
		if r0 == r {
			continue
		}
		if !slices.Equal(codes[int(r)*nCodes:(int(r)+1)*nCodes], codes[int(r0)*nCodes:(int(r0)+1)*nCodes]) ||
			!slices.Equal(x[int(r)*nX:(int(r)+1)*nX], x[int(r0)*nX:(int(r0)+1)*nX]) {
			return conflict(u, v, r, r0)
		}
	}
	return nil
}

// edgeIndex is the index of (u, v) in sorted pairs that hold it.
func edgeIndex(edges []int32, u, v int32) int {
	lo, hi := 0, len(edges)/2
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if c := cmp.Or(cmp.Compare(edges[2*h], u), cmp.Compare(edges[2*h+1], v)); c < 0 {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}

// TaskFor is the task of graph labels as OGB's loaders take them: T
// targets a graph; allInts, every label an integer (none missing);
// binary, every label 0, 1 or missing. One integer label a graph with a
// value beyond 0 and 1 is a class; labels of 0, 1 and missing are binary
// targets; anything else, regression targets.
func TaskFor(targets int, allInts, binary bool) shard.TaskKind {
	switch {
	case targets == 1 && allInts && !binary:
		return shard.TaskClass
	case binary:
		return shard.TaskBinary
	}
	return shard.TaskRegression
}

// ChooseTask is the task of graph labels when the user named one (asked;
// "" or "auto": TaskFor's guess), or an error saying why the labels
// cannot be that task: a class needs one integer label a graph, binary
// targets 0, 1 or missing. The caller names the file and line.
func ChooseTask(asked shard.TaskKind, targets int, allInts, binary bool) (shard.TaskKind, error) {
	switch asked {
	case "", TaskAuto:
		return TaskFor(targets, allInts, binary), nil
	case shard.TaskClass:
		if targets != 1 || !allInts {
			return "", fmt.Errorf("--task class needs one integer label a graph; these labels have %d value(s) a graph%s",
				targets, map[bool]string{true: "", false: ", not all integers"}[allInts])
		}
	case shard.TaskBinary:
		if !binary {
			return "", fmt.Errorf("--task binary needs targets of 0, 1 or missing; these have other values")
		}
	case shard.TaskRegression:
	default:
		return "", fmt.Errorf("task %q: want auto, class, binary or regression", asked)
	}
	return asked, nil
}

// TaskAuto asks ChooseTask for OGB's rule (TaskFor).
const TaskAuto shard.TaskKind = "auto"

// ClassesOnly refuses a task other than a class (or auto) for a format
// whose graph labels are classes (TU, GIN).
func ClassesOnly(o OpenOptions, format, path string) error {
	if o.Task == "" || o.Task == TaskAuto || o.Task == shard.TaskClass {
		return nil
	}
	return Errorf(format, path, 0, 0, "--task %s: %s graph labels are classes", o.Task, format)
}

// CompactMin is the fewest listings a graph holds before CompactListings
// is worth its sort: a reader compacts a graph's listings whenever they
// reach twice what the last compaction kept, and at least this many.
var CompactMin = 1 << 20

// CompactListings drops the repeated listings of a graph's edges read so
// far, so that a file listing one edge millions of times holds one entry
// for it, not millions: keys (Pack) are the listings, row i's features are
// codes[i*nCodes:] and x[i*nX:], and line[i] is its row in the file. Per
// edge and direction the first listing is kept (in file order); a dropped
// one must carry its edge's first listing's features, else conflict(u, v,
// line, first line)'s error; each dropped listing counts as a duplicate.
// Canon.Build then gives the same edges, first listings and stats as it
// would have from every listing. The slices are compacted in place.
func CompactListings(keys []Entry, line []int32, codes []int32, nCodes int, x []float32, nX int, st *Stats,
	conflict func(u, v, row, firstRow int32) error) ([]Entry, []int32, []int32, []float32, error) {
	idx := pairOrder(keys)
	keep := make([]bool, len(keys))
	for g := 0; g < len(idx); {
		first, pair := idx[g], keys[idx[g]]>>1
		var seen [2]bool
		for ; g < len(idx) && keys[idx[g]]>>1 == pair; g++ {
			i := idx[g]
			if i != first && (!slices.Equal(codes[int(i)*nCodes:(int(i)+1)*nCodes], codes[int(first)*nCodes:(int(first)+1)*nCodes]) ||
				!slices.Equal(x[int(i)*nX:(int(i)+1)*nX], x[int(first)*nX:(int(first)+1)*nX])) {
				return nil, nil, nil, nil, conflict(int32(pair>>32), int32(pair&(1<<32-1)), line[i], line[first])
			}
			if d := keys[i] & 1; !seen[d] {
				seen[d], keep[i] = true, true
			} else {
				st.Duplicates++
			}
		}
	}
	n := 0
	for i, k := range keep {
		if !k {
			continue
		}
		keys[n], line[n] = keys[i], line[i]
		copy(codes[n*nCodes:(n+1)*nCodes], codes[i*nCodes:(i+1)*nCodes])
		copy(x[n*nX:(n+1)*nX], x[i*nX:(i+1)*nX])
		n++
	}
	return keys[:n], line[:n], codes[:n*nCodes], x[:n*nX], nil
}
