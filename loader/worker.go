package loader

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// retainWork is the most working memory a worker keeps between batches:
// a batch whose largest graph needs more drops its buffers after it.
const retainWork = 16 << 20

// worker holds one goroutine's reusable buffers.
type worker struct {
	l       *Loader
	p       *Plan
	pages   *shard.Schedule // the stream's: graphs are pinned through it
	scratch aug.Scratch
	in, out aug.Graph
	// ops holds the batch's ops, graph-major: graph i's copy t gets
	// ops[i·k+t] (k copies; 1 for a plain stream).
	ops []aug.Op
	sw  *structWork // structures: the rotation's and noise's draws, the neighbour list
}

// newWorker returns a worker for one stream, with the buffers an earlier
// stream's worker left in the Loader's pool (a stream's first batches
// then grow none), or new ones. Outputs do not depend on a buffer's
// history (aug.TestScratchHistoryIndependent).
func newWorker(l *Loader, p *Plan, pages *shard.Schedule) *worker {
	w, _ := l.workers.Get().(*worker)
	if w == nil {
		w = new(worker)
	}
	w.l, w.p, w.pages = l, p, pages
	return w
}

// done gives the worker's buffers back to the Loader's pool once its
// stream has no more batches for it, holding nothing of the stream's: no
// op, context, page view or index (a cache limit may let those go).
func (w *worker) done() {
	l := w.l
	w.l, w.p, w.pages = nil, nil, nil
	clear(w.ops)
	w.ops = w.ops[:0]
	w.in.ForgetInput()
	w.out.Index = nil
	w.scratch.Forget()
	l.workers.Put(w)
}

// batch builds batch b of the plan into a collator from the loader's pool,
// its edges into the room lent to it, if any.
func (w *worker) batch(ctx context.Context, b int, lent loan) result {
	col, _ := w.l.collators.Get().(*collator)
	if col == nil {
		col = new(collator)
	}
	col.borrow(lent)
	var rec arrow.RecordBatch
	var err error
	if w.l.st != nil {
		rec, err = w.buildStructures(ctx, col, b)
	} else {
		rec, err = w.build(ctx, col, b)
	}
	unchanged := w.scratch.TakeUnchanged()
	if b < len(w.p.Work) && w.p.Work[b] > retainWork {
		// A large graph's scratch is not kept for the next batch, which is
		// charged only its own.
		w.scratch, w.in, w.out = aug.Scratch{}, aug.Graph{}, aug.Graph{}
	}
	return result{rec, col, err, unchanged}
}

// build augments and collates one batch. A panic inside an augmentation is
// recovered into a *GraphError naming the graph; one anywhere else in the
// batch into an error naming the batch's first graph, so a bug fails one
// request and never the daemon. A done ctx stops it between graphs (a
// graph may wait for its page to be read: a batch of a thrashing cache
// takes seconds, and a shutdown must not).
func (w *worker) build(ctx context.Context, col *collator, b int) (rec arrow.RecordBatch, err error) {
	items := w.p.Batches[b]
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, fmt.Errorf("loader: batch starting at graph %d: panic: %v", items[0].Graph, p)
		}
	}()
	col.reset(&w.l.src.ds.lay, w.p.nodeWidth, w.p.edgeWidth)
	seed := w.l.cfg.Seed
	// A twin batch is the batch's graphs once per twin, twin-major: rows
	// t·n … t·n+n−1 are twin t's, graph i of every twin the same graph.
	// Each graph's ops are drawn once for the batch, every copy's.
	k := max(w.p.Twins, 1)
	var buf [wire.MaxTwins]aug.Op
	w.ops = w.ops[:0]
	for _, it := range items {
		w.ops = append(w.ops, w.p.ops(seed, it, &buf)...)
	}
	for t := range k {
		for i, it := range items {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			op := w.ops[i*k+t]
			fused, err := w.augment(ctx, op, b, it.Graph, seed, it.Pass, aug.OpID(op)+uint64(t)*aug.TwinStride, col)
			if err != nil {
				return nil, err
			}
			col.add(&w.out, op.Spec().Name, it.Padded, fused)
		}
	}
	return col.record(w.p.Schema, w.l.cfg.Mem), nil
}

// augment applies op to graph id of batch b into w.out, drawing from stream (the
// op's id, offset for a twin). An op that can (aug.CoalescedApplier)
// writes the edges straight into col's, and augment reports it fused.
func (w *worker) augment(ctx context.Context, op aug.Op, b int, id int64, seed, e, stream uint64, col *collator) (fused bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &GraphError{Graph: id, Policy: op.Spec().Name, Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	if err := w.l.src.load(ctx, w.pages, b, id, &w.in); err != nil {
		return false, &GraphError{Graph: id, Policy: op.Spec().Name, Err: err}
	}
	r := w.scratch.Rand(seed, e, id, stream)
	w.scratch.SetContext(ctx) // SubMix's partner is read for this request
	if ca, ok := op.(aug.CoalescedApplier); ok && !w.in.HasEdgeFeatures() {
		// Edge features follow out.Edges: such a graph is collated from
		// them with its edges' ids.
		err, fused = ca.ApplyCoalesced(&w.in, &w.out, r, &w.scratch, &col.edges, col.base), true
	} else {
		err = op.Apply(&w.in, &w.out, r, &w.scratch)
	}
	if err != nil {
		return false, &GraphError{Graph: id, Policy: op.Spec().Name, Err: err}
	}
	return fused, nil
}
