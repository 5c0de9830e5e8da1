package shard

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/internal/crc32c"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/internal/version"
)

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
	// Order stores the graphs in a seeded random order ("random:SEED",
	// order.go) instead of id order: the writer then holds every graph
	// until Finish (the decoded set in memory) and writes them in that
	// order, ids unchanged.
	Order string
	// Mem allocates Arrow buffers; default memory.DefaultAllocator.
	Mem memory.Allocator
	// Generation, when set (16 lowercase hex digits), goes into the shard
	// files' and graph-size index's names and the manifest
	// (Manifest.Generation): for a folder that will replace another in
	// object storage without overwriting its files. Empty for local
	// folders.
	Generation string

	// Format 3: any of these makes the writer write format 3 (and
	// FeatureKind, FeatureDim and EdgeLabels must then be unset). The
	// columns' Width must hold every code (else Append fails with
	// ErrCodeWidth); their vocabularies are at least what is declared and
	// at least one past the largest code written. Task is required: a
	// class task fills Label, the others Targets.
	NodeColumns *Columns
	EdgeColumns *Columns
	Task        *Task

	// Structures makes the writer write format 4 (FeatureKind and the
	// format 3 options unset): graphs are structures, Append's Graph
	// carries Numbers, Positions, Cell, PBC, Shifts and Props in the
	// order of Structures.Properties (whose Missing and whose Elements
	// the writer counts).
	Structures *Structures
}

// V4 reports whether the options ask for format 4.
func (o *WriterOptions) V4() bool { return o.Structures != nil }

// V3 reports whether the options ask for format 3.
func (o *WriterOptions) V3() bool {
	return o.NodeColumns != nil || o.EdgeColumns != nil || o.Task != nil
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
	if o.V4() {
		s := *o.Structures
		s.Units, s.Elements = Units(), nil
		if o.V3() || (o.FeatureKind != "" && o.FeatureKind != FeatureStructures) || o.FeatureDim != 0 || o.EdgeLabels {
			errs = append(errs, fmt.Errorf("shard: format 4 options with another format's features"))
		}
		if err := s.validate(); err != nil {
			errs = append(errs, err)
		}
	} else if o.V3() {
		if o.FeatureKind != "" && o.FeatureKind != FeatureColumns || o.FeatureDim != 0 || o.EdgeLabels {
			errs = append(errs, fmt.Errorf("shard: format 3 options with format 2's feature kind %q, dim %d or edge labels", o.FeatureKind, o.FeatureDim))
		}
		if o.Task == nil || (o.Task.Kind != TaskClass && !o.Task.Floats()) || (o.Task.Floats() && o.Task.Targets < 1) {
			errs = append(errs, fmt.Errorf("shard: format 3 needs a task (class, or binary or regression with targets ≥ 1), got %+v", o.Task))
		}
		for _, c := range []*Columns{o.NodeColumns, o.EdgeColumns} {
			if c.Cols() > 0 && c.Width != 1 && c.Width != 2 && c.Width != 4 {
				errs = append(errs, fmt.Errorf("shard: code width %d (want 1, 2 or 4)", c.Width))
			}
			if c.DenseDim() < 0 {
				errs = append(errs, fmt.Errorf("shard: dense dim %d", c.Dense))
			}
		}
	} else {
		if !o.FeatureKind.Valid() || o.FeatureKind == FeatureColumns {
			errs = append(errs, fmt.Errorf("shard: unknown feature kind %q", o.FeatureKind))
		}
		if o.FeatureDim < 1 {
			errs = append(errs, fmt.Errorf("shard: feature dim %d is not positive", o.FeatureDim))
		}
	}
	if _, err := ParseCompression(string(o.Compression)); err != nil {
		errs = append(errs, err)
	}
	if o.ShardBytes < 0 || o.BatchGraphs < 0 || o.BatchValues < 0 {
		errs = append(errs, fmt.Errorf("shard: negative shard bytes %d, batch graphs %d or batch values %d", o.ShardBytes, o.BatchGraphs, o.BatchValues))
	}
	if o.Generation != "" && !ValidGeneration(o.Generation) {
		errs = append(errs, fmt.Errorf("shard: generation %q is not 16 lowercase hex digits", o.Generation))
	}
	if order, err := ParseOrder(o.Order); err != nil {
		errs = append(errs, err)
	} else if order != o.Order {
		errs = append(errs, fmt.Errorf("shard: order %q: write it %q", o.Order, order))
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
	next   int64 // next storage position (Manifest.IDAt)
	stats  Stats

	// Opts.Order: the graphs appended (by id) until Finish, and then the
	// order they are written in.
	held  []Graph
	order *graphOrder

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

	// Format 3: the columns written (vocabularies grown to the codes
	// seen), the NaN targets counted.
	node, edge *Columns
	missing    int64

	sizes *sizesWriter // the graph-size index, written as graphs come

	files []FileInfo // AddFile's, for the manifest

	// Format 4: structures without each property, atomic numbers seen.
	propMissing []int64
	elements    [119]bool
}

func cloneColumns(c *Columns) *Columns {
	if c == nil {
		return nil
	}
	d := *c
	d.Categorical = slices.Clone(c.Categorical)
	return &d
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
	w := &Writer{out: out, tmp: td.Path, td: td, opts: o}
	if w.sizes, err = newSizesWriter(td.Path, w.opts.Generation); err != nil {
		td.Abort()
		return nil, err
	}
	if o.V3() {
		w.node, w.edge = cloneColumns(o.NodeColumns), cloneColumns(o.EdgeColumns)
		w.schema = SchemaV3(o.Dataset, w.node, w.edge, o.Task)
	} else if o.V4() {
		w.schema = SchemaV4(o.Dataset, o.Structures)
		w.propMissing = make([]int64, len(o.Structures.Properties))
	} else {
		w.schema = Schema(o.Dataset, o.FeatureKind, o.FeatureDim, o.EdgeLabels)
	}
	w.newBatch()
	return w, nil
}

// TempDir is the folder being written (removed by Abort, renamed by Finish).
func (w *Writer) TempDir() string { return w.tmp }

// Append adds the next graph. Graph ids must be 0, 1, 2, ... in order. The
// writer copies what it needs: g may be reused once Append returns.
func (w *Writer) Append(g *Graph) error {
	if w.opts.Order == "" {
		return w.add(g)
	}
	if want := int64(len(w.held)); g.ID != want {
		return fmt.Errorf("shard: graph id %d out of order, want %d", g.ID, want)
	}
	w.held = append(w.held, cloneGraph(g))
	return nil
}

// cloneGraph copies g's slices.
func cloneGraph(g *Graph) Graph {
	c := *g
	c.Edges, c.Codes, c.X, c.EdgeLabels = slices.Clone(g.Edges), slices.Clone(g.Codes), slices.Clone(g.X), slices.Clone(g.EdgeLabels)
	c.NodeCat = Codes{U8: slices.Clone(g.NodeCat.U8), U16: slices.Clone(g.NodeCat.U16), I32: slices.Clone(g.NodeCat.I32)}
	c.EdgeCat = Codes{U8: slices.Clone(g.EdgeCat.U8), U16: slices.Clone(g.EdgeCat.U16), I32: slices.Clone(g.EdgeCat.I32)}
	c.EdgeX, c.Targets = slices.Clone(g.EdgeX), slices.Clone(g.Targets)
	c.Numbers, c.Positions, c.Cell, c.Shifts = slices.Clone(g.Numbers), slices.Clone(g.Positions), slices.Clone(g.Cell), slices.Clone(g.Shifts)
	if g.Props != nil {
		c.Props = make([][]float64, len(g.Props))
		for k, p := range g.Props {
			c.Props[k] = slices.Clone(p)
		}
	}
	return c
}

// add writes the graph of the next storage position.
func (w *Writer) add(g *Graph) error {
	want := w.next
	if w.order != nil {
		want = int64(w.order.ids[w.next])
	}
	if g.ID != want {
		return fmt.Errorf("shard: graph id %d out of order, want %d", g.ID, want)
	}
	if g.NumNodes < 0 || len(g.Edges)%2 != 0 {
		return fmt.Errorf("shard: graph %d: bad shape (%d nodes, %d edge ids)", g.ID, g.NumNodes, len(g.Edges))
	}
	if w.opts.V4() != g.IsStructure() {
		return fmt.Errorf("shard: graph %d: a structure in a folder of graphs, or a graph in a folder of structures", g.ID)
	}
	if err := w.sizes.add(g); err != nil {
		return fmt.Errorf("shard: %s: %w", GraphSizesName, err)
	}
	if w.opts.V4() {
		return w.appendV4(g)
	}
	if w.opts.V3() {
		return w.appendV3(g)
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
	w.counted(b, vals, int(g.NumNodes), g.NumEdges())
	w.stats.IsolatedNodes += w.isolated(g)
	return nil
}

// counted adds a graph of n nodes, m edges and vals list values, just
// appended to batch b, to the batch's and the writer's counts.
func (w *Writer) counted(b *batchBuf, vals, n, m int) {
	b.values += vals
	b.nodes += int64(n)
	b.edges += int64(m)
	w.next++
	w.stats.Graphs++
	w.stats.Nodes += int64(n)
	w.stats.Edges += int64(m)
	w.stats.MaxNodes = max(w.stats.MaxNodes, int64(n))
	w.stats.MaxEdges = max(w.stats.MaxEdges, int64(m))
}

// isolated counts g's nodes without an edge, in O(nodes + edges) with a
// stamp buffer reused across graphs.
func (w *Writer) isolated(g *Graph) int64 {
	if sparse(g) {
		touched, _ := endpoints(g.Edges)
		return int64(g.NumNodes) - touched
	}
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
	name := shardName(w.opts.Generation, len(w.shards))
	f, err := os.OpenFile(filepath.Join(w.tmp, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	w.file = f
	w.crc = crc32c.New()
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

func (w *Writer) closeShard() error {
	if w.ipcf == nil {
		return nil
	}
	if err := iox.SyncClose(w.file, w.ipcf.close, w.bw.Flush); err != nil {
		return fmt.Errorf("shard: close %s: %w", w.cur.File, err)
	}
	w.cur.Bytes = w.cnt.N
	w.cur.CRC32C = fmt.Sprintf("%08x", w.crc.Sum32())
	w.cur.PageMap = w.ipcf.pageMap()
	w.shards = append(w.shards, w.cur)
	w.cur = ShardInfo{}
	w.ipcf, w.file, w.bw = nil, nil, nil
	return nil
}

// Finish flushes the last batch, writes manifest.json from m (shards, stats
// counts, format and tool version are filled in here) and renames the folder
// into place. After Finish the Writer is done.
func (w *Writer) Finish(m Manifest) (*Manifest, error) {
	return w.FinishContext(context.Background(), m)
}

// FinishContext is Finish, stopped by ctx: under Opts.Order the graphs are
// written here, all of them, so it checks ctx between graphs, and once
// more just before the folder is renamed into place. Once cancelled it
// returns ctx's error and commits nothing (an existing folder stays as it
// was; the caller Aborts): a SIGTERM during a random-order write was
// otherwise honoured only after the output had replaced the old one.
func (w *Writer) FinishContext(ctx context.Context, m Manifest) (*Manifest, error) {
	if w.opts.Order != "" {
		o, err := newGraphOrder(w.opts.Order, int64(len(w.held)))
		if err != nil {
			return nil, fmt.Errorf("shard: %w", err)
		}
		w.order = o
		for i, id := range o.ids {
			if i&255 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			if err := w.add(&w.held[id]); err != nil {
				return nil, err
			}
			w.held[id] = Graph{} // written: its memory may go
		}
		w.held = nil
	}
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
	m.FormatVersion = FormatV2
	m.ToolVersion = version.Version
	m.Dataset = w.opts.Dataset
	m.Compression = w.opts.Compression
	m.Order = w.opts.Order
	m.Generation = w.opts.Generation
	m.Files = slices.Clone(w.files)
	slices.SortFunc(m.Files, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) })
	m.HasEdgeLabels = w.opts.EdgeLabels
	m.Features.Kind, m.Features.Dim = w.opts.FeatureKind, w.opts.FeatureDim
	if w.opts.V4() {
		s := *w.opts.Structures
		s.Units = Units()
		s.Properties = slices.Clone(s.Properties)
		for k := range s.Properties {
			s.Properties[k].Missing = w.propMissing[k]
		}
		s.Elements = []int{}
		for z, seen := range w.elements {
			if seen {
				s.Elements = append(s.Elements, z)
			}
		}
		m.FormatVersion = FormatV4
		m.Features = Features{Kind: FeatureStructures}
		m.Structures = &s
		m.Classes, m.LabelMap = 0, []string{}
	}
	if w.opts.V3() {
		m.FormatVersion = FormatV3
		m.Features = Features{Kind: FeatureColumns}
		m.NodeFeatures, m.EdgeFeatures = w.node, w.edge
		t := *w.opts.Task
		t.Missing = w.missing
		m.Task = &t
		if t.Floats() {
			m.Classes, m.LabelMap = 0, nil
		}
	}
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
	// The graph-size index names the manifest it belongs to: written
	// before it, so a folder with a manifest always has its index.
	if err := w.sizes.finish(sha256.Sum256(data), m.Stats.Graphs); err != nil {
		return nil, err
	}
	if err := iox.WriteFileAtomic(filepath.Join(w.tmp, ManifestName), data, 0o644); err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := w.td.Commit(); err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	return &m, nil
}

// AddFile writes a file of the caller's into the folder (before Finish,
// so it appears with the shards, atomically): a split file beside the
// shards. name is a plain file name that is neither the manifest's nor a
// shard's; the manifest lists it with its SHA-256 (Manifest.Files), and
// in a folder with a generation it is stored under that generation
// (Manifest.StoredName).
func (w *Writer) AddFile(name string, data []byte) error {
	if err := ValidFileName(name); err != nil {
		return fmt.Errorf("shard: cannot add a file to a shard folder: %w", err)
	}
	for _, f := range w.files {
		if f.Name == name {
			return fmt.Errorf("shard: %s added twice", name)
		}
	}
	if err := iox.WriteFileAtomic(filepath.Join(w.tmp, storedName(w.opts.Generation, name)), data, 0o644); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	sum := sha256.Sum256(data)
	w.files = append(w.files, FileInfo{Name: name, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	return nil
}

// Abort removes the temporary folder. Safe to call after Finish (no-op).
func (w *Writer) Abort() {
	w.discard()
	if w.sizes != nil {
		w.sizes.abort()
	}
	if w.file != nil {
		w.file.Close()
		w.file = nil
	}
	w.td.Abort()
}
