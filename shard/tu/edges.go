package tu

import (
	"context"
	"fmt"
	"io"

	"github.com/augloader/augloader/shard"
)

// EdgeStats counts what Graphs dropped or repaired in DS_A.txt.
type EdgeStats struct {
	DirectedEntries int64 // lines of DS_A.txt
	SelfLoops       int64 // entries (i, i), dropped
	// Duplicates counts directed entries listed more than once, dropped
	// (IMDB lists every entry twice).
	Duplicates int64
	// Asymmetric counts undirected edges listed in one direction only; the
	// graph is made undirected, so they are kept.
	Asymmetric int64
}

// entry packs a canonical undirected entry: u<<33 | v<<1 | dir, u < v local
// ids, dir = 1 when the file listed it as (v, u).
type entry = uint64

func pack(u, v int64) entry {
	if u < v {
		return uint64(u)<<33 | uint64(v)<<1
	}
	return uint64(v)<<33 | uint64(u)<<1 | 1
}

// Graphs streams DS_A.txt (and DS_edge_labels.txt in step) and calls fn for
// every graph in id order with its canonical edges: each undirected edge
// once as (u, v), u < v, sorted. The *shard.Graph and its slices are reused
// after fn returns. With buffered false, a file that goes back to an earlier
// graph stops with ErrUnordered; with buffered true, all entries are held
// (O(edges) memory) and any order is accepted.
func (d *Dataset) Graphs(ctx context.Context, buffered bool, fn func(*shard.Graph) error) (EdgeStats, error) {
	if d.src.Layout == LayoutGIN {
		return d.graphsGIN(ctx, fn) // graph by graph by construction
	}
	var st EdgeStats
	fileA := d.src.FileName(SuffixA)
	rc, err := d.src.Open(SuffixA)
	if err != nil {
		return st, err
	}
	defer rc.Close()
	la := newLineReader(rc, fileA)
	var le *lineReader
	if d.HasEdgeLabels {
		rcl, err := d.src.Open(SuffixEdgeLabels)
		if err != nil {
			return st, err
		}
		defer rcl.Close()
		le = newLineReader(rcl, d.src.FileName(SuffixEdgeLabels))
	}

	e := emitter{d: d, fn: fn, st: &st}
	var (
		cur    int     // streaming: the graph being collected
		bufG   []int32 // buffered: graph of each entry
		keys   []entry // entries of the current graph (streaming) or all (buffered)
		labels []int32 // edge labels in step with keys
		n      = d.NumNodes
	)
	for {
		if st.DirectedEntries&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return st, err
			}
		}
		a, c, ok := la.fastPair()
		if !ok {
			b, err := la.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return st, err
			}
			if a, c, ok = pair(b); !ok {
				if a, c, err = la.slowPair(b); err != nil {
					return st, err
				}
			}
		}
		st.DirectedEntries++
		if a < 1 || a > n {
			return st, formatErr(fileA, la.line, 1, "node %d out of range 1..%d", a, n)
		}
		if c < 1 || c > n {
			return st, formatErr(fileA, la.line, 2, "node %d out of range 1..%d", c, n)
		}
		ga, gc := d.nodeGraph[a-1], d.nodeGraph[c-1]
		if ga != gc {
			return st, formatErr(fileA, la.line, 0, "edge (%d, %d) joins graph %d and graph %d", a, c, ga+1, gc+1)
		}
		var lab int32
		if le != nil {
			v, err := le.nextInt()
			if err == io.EOF {
				return st, formatErr(le.file, 0, 0, "%d edge labels for more edges in %s", le.line, fileA)
			}
			if err != nil {
				return st, err
			}
			lab = int32(v - d.EdgeLabelMin)
		}
		if a == c {
			st.SelfLoops++
			continue
		}
		g := int(ga)
		if !buffered {
			if g < cur {
				return st, fmt.Errorf("%w: %s:%d lists graph %d after graph %d", ErrUnordered, fileA, la.line, g+1, cur+1)
			}
			for ; cur < g; cur++ {
				if err := e.emit(cur, keys, labels); err != nil {
					return st, err
				}
				keys, labels = keys[:0], labels[:0]
			}
		} else {
			bufG = append(bufG, int32(g))
		}
		start := d.GraphStart[g]
		keys = append(keys, pack(a-1-start, c-1-start))
		if le != nil {
			labels = append(labels, lab)
		}
	}
	if le != nil {
		if _, err := le.next(); err != io.EOF {
			return st, formatErr(le.file, 0, 0, "more edge labels than the %d lines of %s", st.DirectedEntries, fileA)
		}
	}
	if !buffered {
		for ; cur < d.NumGraphs; cur++ {
			if err := e.emit(cur, keys, labels); err != nil {
				return st, err
			}
			keys, labels = keys[:0], labels[:0]
		}
		return st, nil
	}
	return st, e.emitBuffered(bufG, keys, labels, le != nil)
}

// slowPair parses an A line that the fast path refused, naming the fault.
func (l *lineReader) slowPair(b []byte) (a, c int64, err error) {
	a, i, err := l.parseInt(b, 0, 1)
	if err != nil {
		return 0, 0, err
	}
	if i, err = l.expectComma(b, i, 2); err != nil {
		return 0, 0, err
	}
	c, i, err = l.parseInt(b, i, 2)
	if err != nil {
		return 0, 0, err
	}
	return a, c, l.expectEnd(b, i, 2)
}

// emitter turns raw entries into canonical graphs and hands them to fn.
type emitter struct {
	d  *Dataset
	fn func(*shard.Graph) error
	st *EdgeStats
	c  canon
	g  shard.Graph
}

func (e *emitter) emit(g int, keys []entry, labels []int32) error {
	n := e.d.GraphStart[g+1] - e.d.GraphStart[g]
	edges, elab := e.c.build(int32(n), keys, labels, e.st)
	e.g = shard.Graph{
		ID: int64(g), Label: e.d.Labels[g], NumNodes: int32(n),
		Edges: edges, Codes: e.d.GraphCodes(g), X: e.d.GraphX(g), EdgeLabels: elab,
	}
	return e.fn(&e.g)
}

// emitBuffered groups all entries by graph with a stable counting sort.
func (e *emitter) emitBuffered(gs []int32, keys []entry, labels []int32, hasLabels bool) error {
	ng := e.d.NumGraphs
	start := make([]int, ng+1)
	for _, g := range gs {
		start[g+1]++
	}
	for g := 0; g < ng; g++ {
		start[g+1] += start[g]
	}
	sk := make([]entry, len(keys))
	var sl []int32
	if hasLabels {
		sl = make([]int32, len(labels))
	}
	pos := append([]int(nil), start[:ng]...)
	for i, g := range gs {
		sk[pos[g]] = keys[i]
		if hasLabels {
			sl[pos[g]] = labels[i]
		}
		pos[g]++
	}
	for g := 0; g < ng; g++ {
		var lab []int32
		if hasLabels {
			lab = sl[start[g]:start[g+1]]
		}
		if err := e.emit(g, sk[start[g]:start[g+1]], lab); err != nil {
			return err
		}
	}
	return nil
}

// canon sorts a graph's entries by (u, v) in O(n + entries) with two stable
// counting-sort passes, then merges duplicates. Buffers are reused.
type canon struct {
	cnt        []int32
	tmp        []entry
	tmpL       []int32
	sorted     []entry
	sortedL    []int32
	edges      []int32
	edgeLabels []int32
}

func (c *canon) build(n int32, keys []entry, labels []int32, st *EdgeStats) ([]int32, []int32) {
	m := len(keys)
	c.edges, c.edgeLabels = c.edges[:0], c.edgeLabels[:0]
	if m == 0 {
		return c.edges, nil
	}
	withL := labels != nil
	c.tmp = grow(c.tmp, m)
	c.sorted = grow(c.sorted, m)
	if withL {
		c.tmpL = grow(c.tmpL, m)
		c.sortedL = grow(c.sortedL, m)
	}
	// Pass 1 by v into tmp, pass 2 by u into sorted: stable, so (u, v) order.
	c.countingPass(n, keys, labels, c.tmp, c.tmpL, 1, withL)
	c.countingPass(n, c.tmp, c.tmpL, c.sorted, c.sortedL, 33, withL)

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

func (c *canon) countingPass(n int32, src []entry, srcL []int32, dst []entry, dstL []int32, shift uint, withL bool) {
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
