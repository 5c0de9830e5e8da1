package shard

import (
	"bufio"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/internal/arrowx"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/internal/version"
)

// Graph is one graph as the format stores it. Edges holds each undirected
// edge once as a pair (u, v) of local node ids with u < v, pairs sorted; Codes
// (categorical kinds) has NumNodes entries, X (attributes) NumNodes*dim.
type Graph struct {
	ID         int64
	Label      int32
	NumNodes   int32
	Edges      []int32
	Codes      []int32
	X          []float32
	EdgeLabels []int32
}

// NumEdges is the number of undirected edges.
func (g *Graph) NumEdges() int { return len(g.Edges) / 2 }

// WriterOptions configure a Writer. Zero values take the stated defaults
// (EnsureDefaults); NewWriter checks them (Validate).
type WriterOptions struct {
	Dataset     string
	FeatureKind FeatureKind
	FeatureDim  int
	EdgeLabels  bool
	// Compression of record batch bodies; default zstd.
	Compression Compression
	// ShardBytes is the target size of one shard file; a shard is closed
	// after the batch that reaches it. Default 64 MiB.
	ShardBytes int64
	// BatchGraphs caps graphs per record batch; default 1024.
	BatchGraphs int
	// BatchValues caps list values (edge ids + features) per record batch;
	// default 4 Mi (16 MiB of int32), and at most ShardBytes/4. A single
	// larger graph gets a batch alone.
	BatchValues int
	// Force replaces an existing output folder (only once the new one is complete).
	Force bool
	// Mem allocates Arrow buffers; default memory.DefaultAllocator.
	Mem memory.Allocator
}

// EnsureDefaults fills the settings left at their zero value.
func (o *WriterOptions) EnsureDefaults() {
	if o.Compression == "" {
		o.Compression = CompressZstd
	}
	if o.ShardBytes == 0 {
		o.ShardBytes = 64 << 20
	}
	if o.BatchGraphs == 0 {
		o.BatchGraphs = 1024
	}
	if o.BatchValues == 0 {
		o.BatchValues = 4 << 20
	}
	// A batch's uncompressed payload stays within the shard target, so small
	// targets still give several shards.
	o.BatchValues = int(min(int64(o.BatchValues), max(o.ShardBytes/4, 1024)))
	if o.Mem == nil {
		o.Mem = memory.DefaultAllocator
	}
}

// Validate checks the options (after EnsureDefaults) and reports every
// problem at once.
func (o *WriterOptions) Validate() error {
	var errs []error
	if !o.FeatureKind.Valid() {
		errs = append(errs, fmt.Errorf("shard: unknown feature kind %q", o.FeatureKind))
	}
	if o.FeatureDim < 1 {
		errs = append(errs, fmt.Errorf("shard: feature dim %d is not positive", o.FeatureDim))
	}
	if _, err := ParseCompression(string(o.Compression)); err != nil {
		errs = append(errs, err)
	}
	if o.ShardBytes < 0 || o.BatchGraphs < 0 || o.BatchValues < 0 {
		errs = append(errs, fmt.Errorf("shard: negative shard bytes %d, batch graphs %d or batch values %d", o.ShardBytes, o.BatchGraphs, o.BatchValues))
	}
	return errors.Join(errs...)
}

// Writer writes a shard folder. It writes into a temporary folder beside the
// destination and renames it into place in Finish, so a crash or an error
// never leaves a folder that looks complete. Not safe for concurrent use;
// it compresses up to GOMAXPROCS record batches at once on goroutines of
// its own and writes them in order, each shard byte for byte the file that
// arrow-go's ipc.FileWriter writes (ipcFile).
type Writer struct {
	out, tmp string
	td       *iox.TempDir
	opts     WriterOptions
	schema   *arrow.Schema

	shards []ShardInfo
	next   int64 // next graph id expected
	stats  Stats

	// Open shard.
	file *os.File
	bw   *bufio.Writer
	crc  hash.Hash32
	cnt  iox.CountingWriter
	ipcf *ipcFile
	cur  ShardInfo

	// The batch being filled, batches being encoded (oldest first; written
	// in that order) and buffers free for reuse.
	b        *batchBuf
	inflight []*encodeJob
	free     []*batchBuf

	seen []int64 // seen[v] == graph id + 1 when node v has an edge (isolated-node count)
}

// NewWriter prepares to write the folder out. It fails with ErrExists when
// out exists and opts.Force is false.
func NewWriter(out string, opts WriterOptions) (*Writer, error) {
	o := opts
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(out); err == nil && !o.Force {
		return nil, fmt.Errorf("%w: %s (use --force to replace it)", ErrExists, out)
	}
	td, err := iox.NewTempDir(out)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	w := &Writer{
		out: out, tmp: td.Path, td: td, opts: o,
		schema: Schema(o.Dataset, o.FeatureKind, o.FeatureDim, o.EdgeLabels),
	}
	w.newBatch()
	return w, nil
}

// TempDir is the folder being written (removed by Abort, renamed by Finish).
func (w *Writer) TempDir() string { return w.tmp }

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
}

func (b *batchBuf) reset(firstID int64) {
	b.firstID = firstID
	b.ids, b.labels, b.nnodes = b.ids[:0], b.labels[:0], b.nnodes[:0]
	b.edgeOff = append(b.edgeOff[:0], 0)
	b.featOff = append(b.featOff[:0], 0)
	b.elOff = append(b.elOff[:0], 0)
	b.edgeVals, b.codeVals, b.elVals, b.xVals = b.edgeVals[:0], b.codeVals[:0], b.elVals[:0], b.xVals[:0]
	b.values, b.nodes, b.edges = 0, 0, 0
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

// Append adds the next graph. Graph ids must be 0, 1, 2, ... in order. The
// writer copies what it needs: g may be reused once Append returns.
func (w *Writer) Append(g *Graph) error {
	if g.ID != w.next {
		return fmt.Errorf("shard: graph id %d out of order, want %d", g.ID, w.next)
	}
	if g.NumNodes < 0 || len(g.Edges)%2 != 0 {
		return fmt.Errorf("shard: graph %d: bad shape (%d nodes, %d edge ids)", g.ID, g.NumNodes, len(g.Edges))
	}
	var featLen int
	if w.opts.FeatureKind.Categorical() {
		featLen = len(g.Codes)
		if featLen != int(g.NumNodes) {
			return fmt.Errorf("shard: graph %d: %d feature codes for %d nodes", g.ID, featLen, g.NumNodes)
		}
	} else {
		featLen = len(g.X)
		if featLen != int(g.NumNodes)*w.opts.FeatureDim {
			return fmt.Errorf("shard: graph %d: %d feature values for %d nodes × dim %d", g.ID, featLen, g.NumNodes, w.opts.FeatureDim)
		}
	}
	if w.opts.EdgeLabels && len(g.EdgeLabels) != len(g.Edges)/2 {
		return fmt.Errorf("shard: graph %d: %d edge labels for %d edges", g.ID, len(g.EdgeLabels), len(g.Edges)/2)
	}
	vals := len(g.Edges) + featLen + len(g.EdgeLabels)
	b := w.b
	if len(b.ids) > 0 && (len(b.ids) >= w.opts.BatchGraphs || b.values+vals > w.opts.BatchValues) {
		if err := w.flushBatch(); err != nil {
			return err
		}
		b = w.b
	}
	if int64(len(b.edgeVals))+int64(len(g.Edges)) > 1<<31-1 || int64(len(b.codeVals))+int64(len(g.X))+int64(len(g.Codes)) > 1<<31-1 {
		return fmt.Errorf("shard: graph %d is too large for one record batch", g.ID)
	}
	b.ids = append(b.ids, g.ID)
	b.labels = append(b.labels, g.Label)
	b.nnodes = append(b.nnodes, g.NumNodes)
	b.edgeVals = appendDoubling(b.edgeVals, g.Edges)
	b.edgeOff = append(b.edgeOff, int32(len(b.edgeVals)))
	if w.opts.FeatureKind.Categorical() {
		b.codeVals = appendDoubling(b.codeVals, g.Codes)
		b.featOff = append(b.featOff, int32(len(b.codeVals)))
	} else {
		b.xVals = appendDoubling(b.xVals, g.X)
		b.featOff = append(b.featOff, int32(len(b.xVals)))
	}
	if w.opts.EdgeLabels {
		b.elVals = appendDoubling(b.elVals, g.EdgeLabels)
		b.elOff = append(b.elOff, int32(len(b.elVals)))
	}
	b.values += vals
	b.nodes += int64(g.NumNodes)
	b.edges += int64(g.NumEdges())
	w.next++
	w.stats.Graphs++
	w.stats.Nodes += int64(g.NumNodes)
	w.stats.Edges += int64(g.NumEdges())
	w.stats.MaxNodes = max(w.stats.MaxNodes, int64(g.NumNodes))
	w.stats.MaxEdges = max(w.stats.MaxEdges, int64(g.NumEdges()))
	w.stats.IsolatedNodes += w.isolated(g)
	return nil
}

// isolated counts g's nodes without an edge, in O(nodes + edges) with a
// stamp buffer reused across graphs.
func (w *Writer) isolated(g *Graph) int64 {
	if cap(w.seen) < int(g.NumNodes) {
		w.seen = make([]int64, g.NumNodes)
	}
	seen, stamp := w.seen[:g.NumNodes], g.ID+1
	touched := int64(0)
	for _, v := range g.Edges {
		if seen[v] != stamp {
			seen[v] = stamp
			touched++
		}
	}
	return int64(g.NumNodes) - touched
}

func (w *Writer) openShard(firstGraph int64) error {
	name := fmt.Sprintf(ShardPattern, len(w.shards))
	f, err := os.OpenFile(filepath.Join(w.tmp, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	w.file = f
	w.crc = crc32.New(crc32.MakeTable(crc32.Castagnoli))
	w.bw = bufio.NewWriterSize(io.MultiWriter(f, w.crc), 1<<20)
	w.cnt = iox.CountingWriter{W: w.bw}
	ipcf, err := newIPCFile(&w.cnt, w.schema, w.opts.Mem)
	if err != nil {
		return fmt.Errorf("shard: %s: %w", name, err)
	}
	w.ipcf = ipcf
	w.cur = ShardInfo{File: name, FirstGraph: firstGraph}
	return nil
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

// record wraps a batch's slices as Arrow arrays without copying them.
func (w *Writer) record(b *batchBuf) arrow.RecordBatch {
	n := len(b.ids)
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
	rec := array.NewRecordBatch(w.schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

func (w *Writer) closeShard() error {
	if w.ipcf == nil {
		return nil
	}
	err := w.ipcf.close()
	if err == nil {
		err = w.bw.Flush()
	}
	if err == nil {
		err = w.file.Sync()
	}
	if cerr := w.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("shard: close %s: %w", w.cur.File, err)
	}
	w.cur.Bytes = w.cnt.N
	w.cur.CRC32C = fmt.Sprintf("%08x", w.crc.Sum32())
	w.shards = append(w.shards, w.cur)
	w.cur = ShardInfo{}
	w.ipcf, w.file, w.bw = nil, nil, nil
	return nil
}

// Finish flushes the last batch, writes manifest.json from m (shards, stats
// counts, format and tool version are filled in here) and renames the folder
// into place. After Finish the Writer is done.
func (w *Writer) Finish(m Manifest) (*Manifest, error) {
	if err := w.flushBatch(); err != nil {
		return nil, err
	}
	if err := w.drain(); err != nil {
		return nil, err
	}
	if err := w.closeShard(); err != nil {
		return nil, err
	}
	m.Format = FormatName
	m.FormatVersion = CurrentVersion
	m.ToolVersion = version.Version
	m.Dataset = w.opts.Dataset
	m.Compression = w.opts.Compression
	m.HasEdgeLabels = w.opts.EdgeLabels
	m.Features.Kind, m.Features.Dim = w.opts.FeatureKind, w.opts.FeatureDim
	m.Stats.Graphs, m.Stats.Nodes, m.Stats.Edges = w.stats.Graphs, w.stats.Nodes, w.stats.Edges
	m.Stats.MaxNodes, m.Stats.MaxEdges = w.stats.MaxNodes, w.stats.MaxEdges
	m.Stats.IsolatedNodes = w.stats.IsolatedNodes
	m.Shards = w.shards
	if err := m.validate(); err != nil {
		return nil, err
	}
	data, err := m.Encode()
	if err != nil {
		return nil, err
	}
	if err := iox.WriteFileAtomic(filepath.Join(w.tmp, ManifestName), data, 0o644); err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	if err := w.td.Commit(); err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	return &m, nil
}

// Abort removes the temporary folder. Safe to call after Finish (no-op).
func (w *Writer) Abort() {
	w.discard()
	if w.file != nil {
		w.file.Close()
		w.file = nil
	}
	w.td.Abort()
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
