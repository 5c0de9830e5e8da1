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
	rc, err := d.src.openHashed(SuffixA) // pairReader reads ahead
	if err != nil {
		return st, err
	}
	defer rc.Close()
	at := graphOf{n: d.NumNodes, nodeGraph: d.nodeGraph, start: d.GraphStart}
	var locate *graphOf // entries made beside the parse, but labels go line by line
	if !d.HasEdgeLabels {
		fresh := at // the parsing goroutines copy it; at is this one's
		locate = &fresh
	}
	la := newPairReader(rc, fileA, pairBlockSize, locate)
	defer la.close() // before rc.Close: it may be reading rc
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
		cur    int       // streaming: the graph being collected
		bufG   []int32   // buffered: graph of each entry
		keys   []entry   // buffered: all entries
		labels []int32   // buffered: edge labels in step with keys
		pipe   *emitPipe // streaming: canonicalises and calls fn beside the parse
	)
	if !buffered {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		pipe = newEmitPipe(&e, cancel, le != nil)
		defer pipe.close()
	}
	// fail prefers the error of fn (or canonicalisation) that stopped the
	// parse to the cancellation the parse saw.
	fail := func(err error) (EdgeStats, error) {
		if pipe != nil {
			if perr := pipe.close(); perr != nil {
				return st, perr
			}
		}
		return st, err
	}
	unordered := func(line int64, g int) error {
		return fmt.Errorf("%w: %s:%d lists graph %d after graph %d", ErrUnordered, fileA, line, g+1, cur+1)
	}
	// addBlock adds the entries made beside the parse of a block whose
	// first line follows line first, run by run.
	addBlock := func(blk *pairBlock, first int64) error {
		for j, run := range blk.runs {
			end := len(blk.keys)
			if j+1 < len(blk.runs) {
				end = blk.runs[j+1].start
			}
			ks := blk.keys[run.start:end]
			if buffered {
				for range ks {
					bufG = append(bufG, int32(run.g))
				}
				keys = append(keys, ks...)
				continue
			}
			if run.g < cur {
				return unordered(first+int64(run.line)+1, run.g)
			}
			for ; cur < run.g; cur++ {
				if err := pipe.endGraph(ctx); err != nil {
					return err
				}
			}
			pipe.addKeys(ks)
		}
		st.DirectedEntries += int64(blk.keyLines)
		st.SelfLoops += blk.selfLoops
		return nil
	}
	var (
		pairs []uint64 // a batch of lines from la
		pi    int      // the next in pairs
	)
	line := func() int64 { return la.lineNo() - int64(len(pairs)-pi) } // the entry's line
	for {
		if st.DirectedEntries&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
		}
		if pi == len(pairs) {
			blk := la.batch()
			pairs, pi = blk.pairs, 0
			if blk.keyLines > 0 {
				if err := ctx.Err(); err != nil {
					return fail(err)
				}
				if err := addBlock(blk, la.lineNo()-int64(len(pairs))); err != nil {
					return fail(err)
				}
				pi = blk.keyLines
				continue // the lines after them, if any, one by one
			}
		}
		var a, c int64
		if pi < len(pairs) {
			a, c = int64(pairs[pi]>>32), int64(pairs[pi]&(1<<32-1))
			pi++
		} else {
			b, err := la.seq.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fail(err)
			}
			var ok bool
			if a, c, ok = pair(b); !ok {
				if a, c, err = la.seq.slowPair(b); err != nil {
					return fail(err)
				}
			}
		}
		st.DirectedEntries++
		if !at.find(a, c) {
			return fail(at.err(fileA, line(), a, c))
		}
		g := at.g
		var lab int32
		if le != nil {
			v, err := le.nextInt()
			if err == io.EOF {
				return fail(formatErr(le.file, 0, 0, "%d edge labels for more edges in %s", le.line, fileA))
			}
			if err != nil {
				return fail(err)
			}
			lab = int32(v - d.EdgeLabelMin)
		}
		if a == c {
			st.SelfLoops++
			continue
		}
		key := pack(a-at.base, c-at.base)
		if buffered {
			bufG = append(bufG, int32(g))
			keys = append(keys, key)
			if le != nil {
				labels = append(labels, lab)
			}
			continue
		}
		if g != cur {
			if g < cur {
				return fail(unordered(line(), g))
			}
			for ; cur < g; cur++ {
				if err := pipe.endGraph(ctx); err != nil {
					return fail(err)
				}
			}
		}
		pipe.add(key, lab)
	}
	if le != nil {
		if _, err := le.next(); err != io.EOF {
			return fail(formatErr(le.file, 0, 0, "more edge labels than the %d lines of %s", st.DirectedEntries, fileA))
		}
	}
	if !buffered {
		for ; cur < d.NumGraphs; cur++ {
			if err := pipe.endGraph(ctx); err != nil {
				return fail(err)
			}
		}
		if err := pipe.flush(ctx); err != nil {
			return fail(err)
		}
		return st, pipe.close()
	}
	return st, e.emitBuffered(bufG, keys, labels, le != nil)
}

// emitPipe runs an emitter (canonicalisation, then fn) on a goroutine of
// its own, so that parsing the next graphs overlaps it. Graphs travel in
// runs (up to runGraphs graphs or runEntries entries) through a few
// recycled buffers; fn is still called once per graph, in id order, and
// never concurrently with itself.
type emitPipe struct {
	e         *emitter
	withL     bool
	cur       *emitRun
	jobs      chan *emitRun
	free      chan *emitRun
	done      chan error
	cancel    context.CancelFunc
	closed    bool
	err       error
	nextGraph int
}

// emitRun is consecutive graphs' entries: graph first+i has
// keys[off[i]:off[i+1]].
type emitRun struct {
	first  int
	off    []int
	keys   []entry
	labels []int32
}

const (
	runGraphs  = 256
	runEntries = 1 << 16
	runBuffers = 3
)

func newEmitPipe(e *emitter, cancel context.CancelFunc, withL bool) *emitPipe {
	p := &emitPipe{e: e, withL: withL, cancel: cancel,
		jobs: make(chan *emitRun, runBuffers), free: make(chan *emitRun, runBuffers), done: make(chan error, 1)}
	for range runBuffers - 1 {
		p.free <- &emitRun{}
	}
	p.cur = &emitRun{off: []int{0}}
	go p.run()
	return p
}

func (p *emitPipe) run() {
	var err error
	for r := range p.jobs {
		for i := 0; err == nil && i+1 < len(r.off); i++ {
			var lab []int32
			if p.withL {
				lab = r.labels[r.off[i]:r.off[i+1]]
			}
			if err = p.e.emit(r.first+i, r.keys[r.off[i]:r.off[i+1]], lab); err != nil {
				p.cancel() // stop the parse
			}
		}
		p.free <- r
	}
	p.done <- err
}

// addKeys adds entries without labels.
func (p *emitPipe) addKeys(ks []entry) { p.cur.keys = append(p.cur.keys, ks...) }

func (p *emitPipe) add(k entry, lab int32) {
	p.cur.keys = append(p.cur.keys, k)
	if p.withL {
		p.cur.labels = append(p.cur.labels, lab)
	}
}

// endGraph closes the current graph, handing the run over when it is full.
func (p *emitPipe) endGraph(ctx context.Context) error {
	p.cur.off = append(p.cur.off, len(p.cur.keys))
	if len(p.cur.off) > runGraphs || len(p.cur.keys) >= runEntries {
		return p.flush(ctx)
	}
	return nil
}

// flush hands the current run over and takes a free buffer.
func (p *emitPipe) flush(ctx context.Context) error {
	if len(p.cur.off) == 1 {
		return nil
	}
	p.cur.first = p.nextGraph
	p.nextGraph += len(p.cur.off) - 1
	select {
	case p.jobs <- p.cur:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case r := <-p.free:
		r.off, r.keys, r.labels = append(r.off[:0], 0), r.keys[:0], r.labels[:0]
		p.cur = r
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// close stops the goroutine and returns its error, if any; idempotent.
func (p *emitPipe) close() error {
	if !p.closed {
		p.closed = true
		close(p.jobs)
		p.err = <-p.done
	}
	return p.err
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
	cnt, cur   []int32
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
	if !withL && c.presorted(n, keys, st) {
		return c.edges, nil
	}
	c.edges = c.edges[:0]
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

// presorted is build's fast path for the layouts TU files use: every
// undirected edge listed in both directions, lines sorted by (first,
// second) or by (second, first). Then one direction's entries, in file
// order, are already sorted by (u, v) (call them S) and the other's are
// sorted by (v, u) (T). presorted checks that in one pass, writes S as the
// edges, and checks that every entry of T is in S, walking each row of S
// with a cursor (T visits a row's v in increasing order): O(n + entries)
// with sequential writes instead of two scatters. Anything else (a
// duplicate, an entry of T missing from S, another order) returns false
// with the stats untouched and build takes the general path. Edge labels
// always take the general path, which picks the label of the first listing.
func (c *canon) presorted(n int32, keys []entry, st *EdgeStats) bool {
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
	for s := range entry(2) {
		if okUV[s] && okVU[1-s] && c.presortedAs(n, keys, s, count[s]) {
			st.Asymmetric += int64(count[s] - count[1-s])
			return true
		}
	}
	return false
}

// presortedAs writes the entries of direction s (S) as the edges and
// reports whether every entry of the other direction (T) is among them.
func (c *canon) presortedAs(n int32, keys []entry, s entry, size int) bool {
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
