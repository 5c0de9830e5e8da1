package tu

import (
	"context"
	"fmt"
	"io"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/internal/text"
	"github.com/augloader/augloader/shard"
)

// Graphs streams DS_A.txt (and DS_edge_labels.txt in step) and calls fn for
// every graph in id order with its canonical edges: each undirected edge
// once as (u, v), u < v, sorted. The *shard.Graph and its slices are reused
// after fn returns. Without o.Buffered, a file that goes back to an earlier
// graph stops with ingest.ErrUnordered; with it, all entries are held
// (O(edges) memory) and any order is accepted.
func (d *Dataset) Graphs(ctx context.Context, o ingest.ReadOptions, fn func(*shard.Graph) error) (ingest.Stats, error) {
	buffered := o.Buffered
	var st ingest.Stats
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
	var le *text.Reader
	if d.HasEdgeLabels {
		rcl, err := d.src.Open(SuffixEdgeLabels)
		if err != nil {
			return st, err
		}
		defer rcl.Close()
		le = text.NewReader(rcl, name, d.src.FileName(SuffixEdgeLabels))
	}

	e := ingest.Emitter{T: &d.Table, Fn: fn, St: &st}
	var (
		cur    int            // streaming: the graph being collected
		bufG   []int32        // buffered: graph of each entry
		keys   []ingest.Entry // buffered: all entries
		labels []int32        // buffered: edge labels in step with keys
		pipe   *emitPipe      // streaming: canonicalises and calls fn beside the parse
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
	fail := func(err error) (ingest.Stats, error) {
		if pipe != nil {
			if perr := pipe.close(); perr != nil {
				return st, perr
			}
		}
		return st, err
	}
	unordered := func(line int64, g int) error {
		return fmt.Errorf("%w: %s:%d lists graph %d after graph %d", ingest.ErrUnordered, fileA, line, g+1, cur+1)
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
			b, err := la.seq.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fail(err)
			}
			var ok bool
			if a, c, ok = text.Pair(b); !ok {
				if a, c, err = la.seq.SlowPair(b); err != nil {
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
			v, err := le.NextInt()
			if err == io.EOF {
				return fail(formatErr(le.File, 0, 0, "%d edge labels for more edges in %s", le.Line, fileA))
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
		key := ingest.Pack(a-at.base, c-at.base)
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
		if _, err := le.Next(); err != io.EOF {
			return fail(formatErr(le.File, 0, 0, "more edge labels than the %d lines of %s", st.DirectedEntries, fileA))
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
	return st, e.EmitBuffered(bufG, keys, labels, le != nil)
}

// emitPipe runs an emitter (canonicalisation, then fn) on a goroutine of
// its own, so that parsing the next graphs overlaps it. Graphs travel in
// runs (up to runGraphs graphs or runEntries entries) through a few
// recycled buffers; fn is still called once per graph, in id order, and
// never concurrently with itself.
type emitPipe struct {
	e         *ingest.Emitter
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
	keys   []ingest.Entry
	labels []int32
}

const (
	runGraphs  = 256
	runEntries = 1 << 16
	runBuffers = 3
)

func newEmitPipe(e *ingest.Emitter, cancel context.CancelFunc, withL bool) *emitPipe {
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
			if err = p.e.Emit(r.first+i, r.keys[r.off[i]:r.off[i+1]], lab); err != nil {
				p.cancel() // stop the parse
			}
		}
		p.free <- r
	}
	p.done <- err
}

// addKeys adds entries without labels.
func (p *emitPipe) addKeys(ks []ingest.Entry) { p.cur.keys = append(p.cur.keys, ks...) }

func (p *emitPipe) add(k ingest.Entry, lab int32) {
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
