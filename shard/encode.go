package shard

// The writer's pages: buffered graphs encoded into Arrow record batches
// on a pool, written to the shard in order.

import (
	"fmt"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/augloader/augloader/internal/arrowx"
)

// batchBuf is one record batch's columns while they are filled and then
// encoded; its slices are reused once the batch is written.
type batchBuf struct {
	firstID            int64
	ids                []int64
	labels, nnodes     []int32
	edgeOff, featOff   []int32
	elOff              []int32
	edgeVals, codeVals []int32
	elVals             []int32
	xVals              []float32
	values             int   // list values, for BatchValues
	nodes, edges       int64 // for the shard's counts

	// Format 3 (codes kept as int32 here, narrowed when the batch is
	// encoded, into the *Bytes buffers).
	targets, edgeX              []float32
	tgtOff, ncOff, ecOff, exOff []int32
	nodeCat, edgeCat            []int32
	nodeCatBytes, edgeCatBytes  []byte

	v4 v4Buf // format 4's own columns
}

func (b *batchBuf) reset(firstID int64) {
	b.firstID = firstID
	b.ids, b.labels, b.nnodes = b.ids[:0], b.labels[:0], b.nnodes[:0]
	b.edgeOff = append(b.edgeOff[:0], 0)
	b.featOff = append(b.featOff[:0], 0)
	b.elOff = append(b.elOff[:0], 0)
	b.edgeVals, b.codeVals, b.elVals, b.xVals = b.edgeVals[:0], b.codeVals[:0], b.elVals[:0], b.xVals[:0]
	b.values, b.nodes, b.edges = 0, 0, 0
	b.tgtOff, b.ncOff = append(b.tgtOff[:0], 0), append(b.ncOff[:0], 0)
	b.ecOff, b.exOff = append(b.ecOff[:0], 0), append(b.exOff[:0], 0)
	b.targets, b.edgeX, b.nodeCat, b.edgeCat = b.targets[:0], b.edgeX[:0], b.nodeCat[:0], b.edgeCat[:0]
}

// newBatch starts the next batch in a free buffer, or in a new one as large
// as the batch before (growing one from empty costs as much as filling it).
func (w *Writer) newBatch() {
	prev := w.b
	if n := len(w.free); n > 0 {
		w.b, w.free = w.free[n-1], w.free[:n-1]
	} else {
		w.b = &batchBuf{}
		if prev != nil {
			w.b.edgeVals = make([]int32, 0, cap(prev.edgeVals))
			w.b.codeVals = make([]int32, 0, cap(prev.codeVals))
			w.b.elVals = make([]int32, 0, cap(prev.elVals))
			w.b.xVals = make([]float32, 0, cap(prev.xVals))
		}
	}
	w.b.reset(w.next)
}

// encodeJob is one batch being encoded and compressed on a goroutine of its
// own; done is closed when p (or err) is ready.
type encodeJob struct {
	b    *batchBuf
	done chan struct{}
	p    ipc.Payload
	err  error
}

// flushBatch hands the pending graphs over to be encoded as one record batch
// beside the caller, and writes the oldest encoded batches once as many as
// there are cores are under way.
func (w *Writer) flushBatch() error {
	if len(w.b.ids) == 0 {
		return nil
	}
	j := &encodeJob{b: w.b, done: make(chan struct{})}
	go func() {
		defer close(j.done)
		rec := w.record(j.b)
		defer rec.Release()
		j.p, j.err = ipc.GetRecordBatchPayload(rec, w.encodeOptions()...)
	}()
	w.inflight = append(w.inflight, j)
	w.newBatch()
	for len(w.inflight) >= runtime.GOMAXPROCS(0) {
		if err := w.writeOldest(); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) encodeOptions() []ipc.Option {
	opts := []ipc.Option{ipc.WithAllocator(w.opts.Mem)} // one goroutine per batch: batches run side by side
	switch w.opts.Compression {
	case CompressZstd:
		opts = append(opts, ipc.WithZstd())
	case CompressLZ4:
		opts = append(opts, ipc.WithLZ4())
	}
	return opts
}

// writeOldest waits for the oldest batch under way and writes it, opening a
// shard first if none is open and closing it when it reached the target
// size: batches land in shards exactly as if each had been written when it
// was cut.
func (w *Writer) writeOldest() error {
	j := w.inflight[0]
	w.inflight = w.inflight[1:]
	<-j.done
	defer func() {
		j.p.Release()
		w.free = append(w.free, j.b)
	}()
	if j.err != nil {
		return fmt.Errorf("shard: encode graphs %d..%d: %w", j.b.firstID, j.b.firstID+int64(len(j.b.ids))-1, j.err)
	}
	if w.ipcf == nil {
		if err := w.openShard(j.b.firstID); err != nil {
			return err
		}
	}
	if err := w.ipcf.writeBatch(&j.p); err != nil {
		return fmt.Errorf("shard: write %s: %w", w.cur.File, err)
	}
	w.cur.NumGraphs += int64(len(j.b.ids))
	w.cur.Batches = append(w.cur.Batches, int64(len(j.b.ids)))
	w.cur.Nodes += j.b.nodes
	w.cur.Edges += j.b.edges
	if w.cnt.N >= w.opts.ShardBytes {
		return w.closeShard()
	}
	return nil
}

// drain writes every batch under way; after an error it only waits for them.
func (w *Writer) drain() error {
	for len(w.inflight) > 0 {
		if err := w.writeOldest(); err != nil {
			w.discard()
			return err
		}
	}
	return nil
}

// discard waits for the batches under way and drops them.
func (w *Writer) discard() {
	for _, j := range w.inflight {
		<-j.done
		j.p.Release()
	}
	w.inflight = nil
}

// record wraps a batch's slices as Arrow arrays without copying them
// (format 3's codes once narrowed to their width).
func (w *Writer) record(b *batchBuf) arrow.RecordBatch {
	n := len(b.ids)
	if w.opts.V4() {
		return w.recordV4(b)
	}
	if w.opts.V3() {
		return w.recordV3(b)
	}
	cols := []arrow.Array{
		arrowx.Primitive(arrow.PrimitiveTypes.Int64, n, arrow.Int64Traits.CastToBytes(b.ids)),
		arrowx.Primitive(arrow.PrimitiveTypes.Int32, n, arrow.Int32Traits.CastToBytes(b.labels)),
		arrowx.Primitive(arrow.PrimitiveTypes.Int32, n, arrow.Int32Traits.CastToBytes(b.nnodes)),
		arrowx.List(arrow.PrimitiveTypes.Int32, b.edgeOff, len(b.edgeVals), arrow.Int32Traits.CastToBytes(b.edgeVals)),
	}
	if w.opts.FeatureKind.Categorical() {
		cols = append(cols, arrowx.List(arrow.PrimitiveTypes.Int32, b.featOff, len(b.codeVals), arrow.Int32Traits.CastToBytes(b.codeVals)))
	} else {
		cols = append(cols, arrowx.List(arrow.PrimitiveTypes.Float32, b.featOff, len(b.xVals), arrow.Float32Traits.CastToBytes(b.xVals)))
	}
	if w.opts.EdgeLabels {
		cols = append(cols, arrowx.List(arrow.PrimitiveTypes.Int32, b.elOff, len(b.elVals), arrow.Int32Traits.CastToBytes(b.elVals)))
	}
	return arrowx.Record(w.schema, n, cols)
}

func (w *Writer) recordV3(b *batchBuf) arrow.RecordBatch {
	n := len(b.ids)
	i32, f32 := arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Float32
	cols := []arrow.Array{arrowx.Primitive(arrow.PrimitiveTypes.Int64, n, arrow.Int64Traits.CastToBytes(b.ids))}
	if w.opts.Task.Floats() {
		cols = append(cols, arrowx.List(f32, b.tgtOff, len(b.targets), arrow.Float32Traits.CastToBytes(b.targets)))
	} else {
		cols = append(cols, arrowx.Primitive(i32, n, arrow.Int32Traits.CastToBytes(b.labels)))
	}
	cols = append(cols,
		arrowx.Primitive(i32, n, arrow.Int32Traits.CastToBytes(b.nnodes)),
		arrowx.List(i32, b.edgeOff, len(b.edgeVals), arrow.Int32Traits.CastToBytes(b.edgeVals)))
	if w.node.Cols() > 0 {
		b.nodeCatBytes = arrowx.AppendCodes(b.nodeCatBytes[:0], b.nodeCat, w.node.Width)
		cols = append(cols, arrowx.List(arrowx.CodeType(w.node.Width), b.ncOff, len(b.nodeCat), b.nodeCatBytes))
	}
	if w.node.DenseDim() > 0 {
		cols = append(cols, arrowx.List(f32, b.featOff, len(b.xVals), arrow.Float32Traits.CastToBytes(b.xVals)))
	}
	if w.edge.Cols() > 0 {
		b.edgeCatBytes = arrowx.AppendCodes(b.edgeCatBytes[:0], b.edgeCat, w.edge.Width)
		cols = append(cols, arrowx.List(arrowx.CodeType(w.edge.Width), b.ecOff, len(b.edgeCat), b.edgeCatBytes))
	}
	if w.edge.DenseDim() > 0 {
		cols = append(cols, arrowx.List(f32, b.exOff, len(b.edgeX), arrow.Float32Traits.CastToBytes(b.edgeX)))
	}
	return arrowx.Record(w.schema, n, cols)
}

// appendDoubling is append for a batch's value slices, which grow to tens
// of MiB: it doubles the capacity where append grows large slices by a
// quarter, so filling a batch copies each value about once, not four times.
func appendDoubling[T any](s, vals []T) []T {
	if n := len(s) + len(vals); n > cap(s) {
		t := make([]T, len(s), max(n, 2*cap(s), 1<<12))
		copy(t, s)
		s = t
	}
	return append(s, vals...)
}
