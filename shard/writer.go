package shard

import (
	"bufio"
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

// WriterOptions configure a Writer. Zero values take the stated defaults.
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

func (o *WriterOptions) withDefaults() WriterOptions {
	r := *o
	if r.Compression == "" {
		r.Compression = CompressZstd
	}
	if r.ShardBytes <= 0 {
		r.ShardBytes = 64 << 20
	}
	if r.BatchGraphs <= 0 {
		r.BatchGraphs = 1024
	}
	if r.BatchValues <= 0 {
		r.BatchValues = 4 << 20
	}
	// A batch's uncompressed payload stays within the shard target, so small
	// targets still give several shards.
	r.BatchValues = int(min(int64(r.BatchValues), max(r.ShardBytes/4, 1024)))
	if r.Mem == nil {
		r.Mem = memory.DefaultAllocator
	}
	return r
}

// Writer writes a shard folder. It writes into a temporary folder beside the
// destination and renames it into place in Finish, so a crash or an error
// never leaves a folder that looks complete. Not safe for concurrent use.
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
	ipcw *ipc.FileWriter
	cur  ShardInfo

	// Pending record batch, reused across batches.
	ids                []int64
	labels, nnodes     []int32
	edgeOff, featOff   []int32
	elOff              []int32
	edgeVals, codeVals []int32
	elVals             []int32
	xVals              []float32
	pendingValues      int

	seen []int64 // seen[v] == graph id + 1 when node v has an edge (isolated-node count)
}

// NewWriter prepares to write the folder out. It fails with ErrExists when
// out exists and opts.Force is false.
func NewWriter(out string, opts WriterOptions) (*Writer, error) {
	o := opts.withDefaults()
	if !o.FeatureKind.Valid() {
		return nil, fmt.Errorf("shard: unknown feature kind %q", o.FeatureKind)
	}
	if o.FeatureDim < 1 {
		return nil, fmt.Errorf("shard: feature dim %d is not positive", o.FeatureDim)
	}
	if _, err := ParseCompression(string(o.Compression)); err != nil {
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
	w.resetBatch()
	return w, nil
}

// TempDir is the folder being written (removed by Abort, renamed by Finish).
func (w *Writer) TempDir() string { return w.tmp }

func (w *Writer) resetBatch() {
	w.ids, w.labels, w.nnodes = w.ids[:0], w.labels[:0], w.nnodes[:0]
	w.edgeOff = append(w.edgeOff[:0], 0)
	w.featOff = append(w.featOff[:0], 0)
	w.elOff = append(w.elOff[:0], 0)
	w.edgeVals, w.codeVals, w.elVals, w.xVals = w.edgeVals[:0], w.codeVals[:0], w.elVals[:0], w.xVals[:0]
	w.pendingValues = 0
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
	if len(w.ids) > 0 && (len(w.ids) >= w.opts.BatchGraphs || w.pendingValues+vals > w.opts.BatchValues) {
		if err := w.flushBatch(); err != nil {
			return err
		}
	}
	if int64(len(w.edgeVals))+int64(len(g.Edges)) > 1<<31-1 || int64(len(w.codeVals))+int64(len(g.X))+int64(len(g.Codes)) > 1<<31-1 {
		return fmt.Errorf("shard: graph %d is too large for one record batch", g.ID)
	}
	w.ids = append(w.ids, g.ID)
	w.labels = append(w.labels, g.Label)
	w.nnodes = append(w.nnodes, g.NumNodes)
	w.edgeVals = append(w.edgeVals, g.Edges...)
	w.edgeOff = append(w.edgeOff, int32(len(w.edgeVals)))
	if w.opts.FeatureKind.Categorical() {
		w.codeVals = append(w.codeVals, g.Codes...)
		w.featOff = append(w.featOff, int32(len(w.codeVals)))
	} else {
		w.xVals = append(w.xVals, g.X...)
		w.featOff = append(w.featOff, int32(len(w.xVals)))
	}
	if w.opts.EdgeLabels {
		w.elVals = append(w.elVals, g.EdgeLabels...)
		w.elOff = append(w.elOff, int32(len(w.elVals)))
	}
	w.pendingValues += vals
	w.next++
	w.stats.Graphs++
	w.stats.Nodes += int64(g.NumNodes)
	w.stats.Edges += int64(g.NumEdges())
	w.stats.MaxNodes = max(w.stats.MaxNodes, int64(g.NumNodes))
	w.stats.MaxEdges = max(w.stats.MaxEdges, int64(g.NumEdges()))
	w.stats.IsolatedNodes += w.isolated(g)
	w.cur.Nodes += int64(g.NumNodes)
	w.cur.Edges += int64(g.NumEdges())
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

func (w *Writer) openShard() error {
	name := fmt.Sprintf(ShardPattern, len(w.shards))
	f, err := os.OpenFile(filepath.Join(w.tmp, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	w.file = f
	w.crc = crc32.New(crc32.MakeTable(crc32.Castagnoli))
	w.bw = bufio.NewWriterSize(io.MultiWriter(f, w.crc), 1<<20)
	w.cnt = iox.CountingWriter{W: w.bw}
	opts := []ipc.Option{ipc.WithSchema(w.schema), ipc.WithAllocator(w.opts.Mem), ipc.WithCompressConcurrency(runtime.GOMAXPROCS(0))}
	switch w.opts.Compression {
	case CompressZstd:
		opts = append(opts, ipc.WithZstd())
	case CompressLZ4:
		opts = append(opts, ipc.WithLZ4())
	}
	ipcw, err := ipc.NewFileWriter(&w.cnt, opts...)
	if err != nil {
		return fmt.Errorf("shard: %s: %w", name, err)
	}
	w.ipcw = ipcw
	w.cur = ShardInfo{File: name, FirstGraph: w.next - int64(len(w.ids))}
	return nil
}

// flushBatch writes the pending graphs as one record batch, opening a shard
// first if none is open and closing it when it reached the target size.
func (w *Writer) flushBatch() error {
	if len(w.ids) == 0 {
		return nil
	}
	if w.ipcw == nil {
		nodes, edges := w.cur.Nodes, w.cur.Edges
		if err := w.openShard(); err != nil {
			return err
		}
		w.cur.Nodes, w.cur.Edges = nodes, edges
	}
	rec := w.record()
	err := w.ipcw.Write(rec)
	rec.Release()
	if err != nil {
		return fmt.Errorf("shard: write %s: %w", w.cur.File, err)
	}
	w.cur.NumGraphs += int64(len(w.ids))
	w.cur.Batches = append(w.cur.Batches, int64(len(w.ids)))
	w.resetBatch()
	if w.cnt.N >= w.opts.ShardBytes {
		return w.closeShard()
	}
	return nil
}

// record wraps the pending slices as Arrow arrays without copying them.
func (w *Writer) record() arrow.RecordBatch {
	n := len(w.ids)
	cols := []arrow.Array{
		arrowx.Primitive(arrow.PrimitiveTypes.Int64, n, arrow.Int64Traits.CastToBytes(w.ids)),
		arrowx.Primitive(arrow.PrimitiveTypes.Int32, n, arrow.Int32Traits.CastToBytes(w.labels)),
		arrowx.Primitive(arrow.PrimitiveTypes.Int32, n, arrow.Int32Traits.CastToBytes(w.nnodes)),
		arrowx.List(arrow.PrimitiveTypes.Int32, w.edgeOff, len(w.edgeVals), arrow.Int32Traits.CastToBytes(w.edgeVals)),
	}
	if w.opts.FeatureKind.Categorical() {
		cols = append(cols, arrowx.List(arrow.PrimitiveTypes.Int32, w.featOff, len(w.codeVals), arrow.Int32Traits.CastToBytes(w.codeVals)))
	} else {
		cols = append(cols, arrowx.List(arrow.PrimitiveTypes.Float32, w.featOff, len(w.xVals), arrow.Float32Traits.CastToBytes(w.xVals)))
	}
	if w.opts.EdgeLabels {
		cols = append(cols, arrowx.List(arrow.PrimitiveTypes.Int32, w.elOff, len(w.elVals), arrow.Int32Traits.CastToBytes(w.elVals)))
	}
	rec := array.NewRecordBatch(w.schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

func (w *Writer) closeShard() error {
	if w.ipcw == nil {
		return nil
	}
	err := w.ipcw.Close()
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
	w.ipcw, w.file, w.bw = nil, nil, nil
	return nil
}

// Finish flushes the last batch, writes manifest.json from m (shards, stats
// counts, format and tool version are filled in here) and renames the folder
// into place. After Finish the Writer is done.
func (w *Writer) Finish(m Manifest) (*Manifest, error) {
	if err := w.flushBatch(); err != nil {
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
	if w.file != nil {
		w.file.Close()
		w.file = nil
	}
	w.td.Abort()
}
