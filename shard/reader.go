package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/augloader/augloader/internal/crc32c"
)

// Reader gives random access to every graph of a shard folder. Open reads
// each shard once, checks its size and CRC-32C against the manifest, decodes
// it and checks its structure; afterwards Graph is a table look-up returning
// slices into the decoded buffers. Safe for concurrent use after Open.
type Reader struct {
	store   Store
	man     *Manifest
	digest  string  // SHA-256 of manifest.json
	batches []batch // all record batches of all shards, in graph order
	first   []int64 // first[i] is the first position of batches[i] (Manifest.IDAt)
	recs    []arrow.RecordBatch
	lazy    *lazy // set under a cache limit (WithCacheLimit): pages on demand
	pages   pageTable

	// The graph-size index (by storage position), read once by Open
	// under its context: a store that stalls it stops a start that is
	// cancelled (SIGTERM), and is waited on once, not by each of its users.
	// sizesErr is ErrNoSizes for a folder without one, or why it cannot
	// be used.
	sizes    *GraphSizes
	sizesErr error

	pageBytesOnce sync.Once
	pageBytes     []int64 // PageBytes, computed once
}

type batch struct {
	ids              []int64
	labels, numNodes []int32
	edgeOff          []int32
	edges            []int32
	featOff          []int32
	codes            []int32
	x                []float32
	elOff            []int32
	edgeLabels       []int32

	// Format 3.
	targets, edgeX       []float32
	tgtOff, ncOff, ecOff []int32
	exOff                []int32
	nodeCat, edgeCat     Codes

	v4 *batchV4 // format 4's own columns
}

// slice returns codes [lo, hi).
func (c Codes) slice(lo, hi int32) Codes {
	switch {
	case c.U8 != nil:
		return Codes{U8: c.U8[lo:hi:hi]}
	case c.U16 != nil:
		return Codes{U16: c.U16[lo:hi:hi]}
	case c.I32 != nil:
		return Codes{I32: c.I32[lo:hi:hi]}
	}
	return Codes{}
}

type readerConfig struct {
	mem         memory.Allocator
	concurrency int
	cacheLimit  int64
}

// Option configures Open.
type Option func(*readerConfig)

// WithAllocator sets the allocator for decompressed buffers (tests pass a
// checked allocator to prove that Close releases everything).
func WithAllocator(mem memory.Allocator) Option { return func(c *readerConfig) { c.mem = mem } }

// WithConcurrency sets how many shards are decoded at once (default GOMAXPROCS).
func WithConcurrency(n int) Option { return func(c *readerConfig) { c.concurrency = n } }

// Open reads the manifest and every shard of dir. Any mismatch is an error
// wrapping ErrCorrupt that names the shard and field; a manifest from a newer
// format is ErrVersion.
func Open(ctx context.Context, dir string, opts ...Option) (*Reader, error) {
	return OpenStore(ctx, DirStore(dir), opts...)
}

// OpenStore is Open of the folder that st holds: a local one (DirStore)
// or one in object storage (objstore.Resolve).
func OpenStore(ctx context.Context, st Store, opts ...Option) (*Reader, error) {
	r, err := openStore(ctx, st, opts...)
	return r, located(st, err)
}

func openStore(ctx context.Context, st Store, opts ...Option) (*Reader, error) {
	cfg := readerConfig{mem: memory.DefaultAllocator, concurrency: runtime.GOMAXPROCS(0)}
	for _, o := range opts {
		o(&cfg)
	}
	man, digest, err := readManifest(ctx, st)
	if err != nil {
		return nil, err
	}
	sizes, sizesErr := readGraphSizes(ctx, st, man, digest)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.cacheLimit > 0 {
		r := &Reader{store: st, man: man, digest: digest, pages: newPageTable(man), sizes: sizes, sizesErr: sizesErr}
		r.openLazy(cfg)
		return r, nil
	}
	perShard := make([][]batch, len(man.Shards))
	perRecs := make([][]arrow.RecordBatch, len(man.Shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(cfg.concurrency, 1))
	for i := range man.Shards {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			b, recs, err := loadShard(gctx, st, man, i, cfg.mem, false)
			perShard[i], perRecs[i] = b, recs
			return err
		})
	}
	err = g.Wait()
	r := &Reader{store: st, man: man, digest: digest, pages: newPageTable(man), sizes: sizes, sizesErr: sizesErr}
	for i := range perShard {
		r.recs = append(r.recs, perRecs[i]...)
		for _, b := range perShard[i] {
			if len(r.first) == 0 {
				r.first = append(r.first, 0)
			} else {
				prev := len(r.batches) - 1
				r.first = append(r.first, r.first[prev]+int64(len(r.batches[prev].ids)))
			}
			r.batches = append(r.batches, b)
		}
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Manifest returns the folder's manifest. Callers must not modify it.
func (r *Reader) Manifest() *Manifest { return r.man }

// Digest is the SHA-256 (hex) of the manifest.json bytes read: with the
// shards' checksums in it, it identifies the whole folder.
func (r *Reader) Digest() string { return r.digest }

// NumGraphs is the number of graphs, with ids 0..NumGraphs-1.
func (r *Reader) NumGraphs() int { return int(r.man.Stats.Graphs) }

// Graph returns graph id. The slices alias the reader's buffers: read-only,
// valid until Close. Under a cache limit use Pin.
func (r *Reader) Graph(id int64) (Graph, error) {
	if r.lazy != nil {
		return Graph{}, fmt.Errorf("shard: Graph on a reader with a cache limit (use Pin)")
	}
	if id < 0 || id >= r.man.Stats.Graphs {
		return Graph{}, fmt.Errorf("%w: id %d of %d", ErrNotFound, id, r.man.Stats.Graphs)
	}
	pos := r.man.PositionOf(id)
	bi := sort.Search(len(r.first), func(i int) bool { return r.first[i] > pos }) - 1
	return r.graphOf(&r.batches[bi], int(pos-r.first[bi])), nil
}

// graphOf is row row of batch b.
func (r *Reader) graphOf(b *batch, row int) Graph {
	g := Graph{
		ID:       b.ids[row],
		NumNodes: b.numNodes[row],
		Edges:    b.edges[b.edgeOff[row]:b.edgeOff[row+1]],
	}
	if b.labels != nil {
		g.Label = b.labels[row]
	}
	if b.v4 != nil {
		structureOf(&g, b, row)
		return g
	}
	if r.man.FormatVersion >= FormatV3 {
		if b.tgtOff != nil {
			g.Targets = b.targets[b.tgtOff[row]:b.tgtOff[row+1]]
		}
		if b.ncOff != nil {
			g.NodeCat = b.nodeCat.slice(b.ncOff[row], b.ncOff[row+1])
		}
		if b.featOff != nil {
			g.X = b.x[b.featOff[row]:b.featOff[row+1]]
		}
		if b.ecOff != nil {
			g.EdgeCat = b.edgeCat.slice(b.ecOff[row], b.ecOff[row+1])
		}
		if b.exOff != nil {
			g.EdgeX = b.edgeX[b.exOff[row]:b.exOff[row+1]]
		}
		return g
	}
	if b.codes != nil {
		g.Codes = b.codes[b.featOff[row]:b.featOff[row+1]]
	} else {
		g.X = b.x[b.featOff[row]:b.featOff[row+1]]
	}
	if b.elOff != nil {
		g.EdgeLabels = b.edgeLabels[b.elOff[row]:b.elOff[row+1]]
	}
	return g
}

// Close releases the decoded buffers.
func (r *Reader) Close() error {
	if r.lazy != nil {
		r.lazy.close()
	}
	for _, rec := range r.recs {
		rec.Release()
	}
	r.recs, r.batches, r.first = nil, nil, nil
	return nil
}

// loadShard reads shard i, checks size, checksum, schema and structure, and
// returns its batches. With full, it also checks that edges are sorted and
// unique (verify does; Open relies on the checksum for that).
func loadShard(ctx context.Context, st Store, man *Manifest, i int, mem memory.Allocator, full bool) (out []batch, recs []arrow.RecordBatch, err error) {
	info := man.Shards[i]
	// The Arrow decoder trusts footer and buffer sizes; on crafted input
	// (a checksum can be forged with the manifest) it can panic. Whatever
	// panics while decoding is a corruption of this shard.
	defer func() {
		if p := recover(); p != nil {
			for _, r := range recs {
				r.Release()
			}
			out, recs, err = nil, nil, corrupt(info.File, "arrow", "malformed file: %v", p)
		}
	}()
	f, err := openShardFile(ctx, st, &info) // its size checked
	if err != nil {
		return nil, nil, err
	}
	data := make([]byte, info.Bytes)
	err = checked(ctx, f, func(rd io.ReaderAt) error {
		if _, err := rd.ReadAt(data, 0); err != nil {
			return fmt.Errorf("shard: %s: %w", info.File, err)
		}
		if got := fmt.Sprintf("%08x", crc32c.Checksum(data)); got != info.CRC32C {
			return corrupt(info.File, "checksum", "crc32c %s, manifest says %s", got, info.CRC32C)
		}
		return nil
	})
	f.Close()
	if err != nil {
		return nil, nil, err
	}
	if err := checkFooter(data); err != nil {
		return nil, nil, corrupt(info.File, "arrow", "%v", err)
	}
	fr, err := newFileReader(data, man.boundedFor(mem, &info, info.NumGraphs))
	if err != nil {
		return nil, nil, corrupt(info.File, "arrow", "%v", err)
	}
	defer fr.Close()
	if err := checkSchema(fr.Schema(), man); err != nil {
		return nil, nil, corrupt(info.File, "schema", "%v", err)
	}
	if fr.NumRecords() != len(info.Batches) {
		return nil, nil, corrupt(info.File, "batches", "%d record batches, manifest says %d", fr.NumRecords(), len(info.Batches))
	}
	var (
		next         = info.FirstGraph
		nodes, edges int64
	)
	release := func() {
		for _, r := range recs {
			r.Release()
		}
	}
	for bi := 0; bi < fr.NumRecords(); bi++ {
		rec, err := fr.RecordBatchAt(bi)
		if err != nil {
			release()
			return nil, nil, corrupt(info.File, "arrow", "batch %d: %v", bi, err)
		}
		recs = append(recs, rec)
		b, err := viewAndCheck(rec, man, next, info.Batches[bi], full)
		if err != nil {
			release()
			return nil, nil, corrupt(info.File, "batch "+strconv.Itoa(bi), "%v", err)
		}
		for r := range b.ids {
			nodes += int64(b.numNodes[r])
			edges += int64(b.edgeOff[r+1]-b.edgeOff[r]) / 2
		}
		next += int64(len(b.ids))
		out = append(out, b)
	}
	if nodes != info.Nodes || edges != info.Edges {
		release()
		return nil, nil, corrupt(info.File, "counts", "%d nodes and %d edges, manifest says %d and %d", nodes, edges, info.Nodes, info.Edges)
	}
	return out, recs, nil
}

func newFileReader(data []byte, mem memory.Allocator) (*ipc.FileReader, error) {
	return ipc.NewMappedFileReader(data, ipc.WithAllocator(mem), ipc.WithBodySizeLimit(MaxBatchBodyBytes))
}

// Verify checks every shard of dir against its manifest: size, checksum,
// schema, structure (sorted unique edges in range, feature shapes) and counts,
// and the graph-size index, when there is one, against each shard's graphs.
// It returns one error per shard that fails, and one for an index that
// cannot be read (nil when all pass). Each shard is read once.
func Verify(ctx context.Context, dir string) (*Manifest, []error) {
	return VerifyStore(ctx, DirStore(dir))
}

// VerifyStore is Verify of the folder that st holds.
func VerifyStore(ctx context.Context, st Store) (*Manifest, []error) {
	man, digest, err := readManifest(ctx, st)
	if err != nil {
		return nil, []error{err}
	}
	var errs []error
	// The graph-size index, when the folder has one, is checked against
	// each shard as it is read.
	gs, err := readGraphSizes(ctx, st, man, digest)
	if err != nil && !errors.Is(err, ErrNoSizes) {
		errs = append(errs, err)
	}
	sw := &sizesWriter{}
	for i := range man.Shards {
		if err := ctx.Err(); err != nil {
			return man, append(errs, err)
		}
		batches, recs, err := loadShard(ctx, st, man, i, memory.DefaultAllocator, true)
		if err == nil && gs != nil {
			err = checkSizes(gs, man.Shards[i].FirstGraph, batches, sw)
		}
		if err == nil && man.Shards[i].PageMap != nil {
			// The page map against the file (a pass of its own: what a
			// reader by the page trusts).
			var ix *shardIndex
			if ix, err = scanShard(ctx, st, man, i); err == nil {
				ix.close()
			}
		}
		for _, r := range recs {
			r.Release()
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range man.Files {
		if err := checkFile(ctx, st, man, f); err != nil {
			errs = append(errs, err)
		}
	}
	return man, errs
}

// checkFile compares a file beside the shards (a split) with its entry in
// the manifest: a file of another folder (a replacement stopped between
// two puts, a copy by hand) is named, never taken for this folder's.
func checkFile(ctx context.Context, st Store, man *Manifest, f FileInfo) error {
	name := man.StoredName(f.Name)
	_, err := readAll(ctx, st, name, max(f.Bytes, 64<<20), func(b []byte) error {
		sum := sha256.Sum256(b)
		if int64(len(b)) != f.Bytes || hex.EncodeToString(sum[:]) != f.SHA256 {
			return corrupt(name, "sha256", "%d bytes of SHA-256 %s; the manifest lists %d bytes of %s: not this folder's %s",
				len(b), hex.EncodeToString(sum[:]), f.Bytes, f.SHA256, f.Name)
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return corrupt(name, "files", "missing: the manifest lists %s (%d bytes)", f.Name, f.Bytes)
	}
	return err
}
