// Package loader turns shards into a stream of augmented, PyG-ready Arrow
// record batches: a worker pool reads graphs through shard.Reader, applies
// the epoch's policy (package epoch) with package aug, and collates each
// training batch into one record batch (docs/protocol.md, "Batch schema").
//
// Contract: the record batches of a request are a pure function of the
// configuration and the request (epoch, rank, world size, batch size, start
// batch): byte-identical whatever the number of workers or the scheduling.
// Output is strictly in batch order; at most Window batches are in flight
// per stream, and a Memory shared by streams bounds their bytes, so a slow
// consumer never grows memory; a cancelled context stops the pool. Node
// and edge budgets hold for the augmented batches sent (each graph is
// counted at aug.Bound of its op). A Loader is safe for concurrent use by
// many requests.
package loader

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync/atomic"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/shard"
)

// dataset is what every Source of one shard folder shares: the reader,
// the graphs' sizes, and the per-graph NodeSam index cache.
type dataset struct {
	r     *shard.Reader
	man   *shard.Manifest
	sizes []aug.Size
	// index[id] is graph id's aug.Index, built on first use when enabled.
	index atomic.Pointer[[]atomic.Pointer[aug.Index]]
	// ppr caches SubMix's PageRank rankings in the indexes, when set.
	ppr atomic.Pointer[aug.PPRCache]
}

// Source reads graphs of a served set as aug.Graphs and serves SubMix's
// partners from it.
type Source struct {
	ds       *dataset
	served   []int64
	maxEdges int    // the served set's largest graph: SubMix's partner bound
	digest   string // SHA-256 of the served ids
}

// NewSource serves the graphs in served (all graphs when nil).
func NewSource(r *shard.Reader, served []int64) (*Source, error) {
	man := r.Manifest()
	if !man.Features.Kind.Categorical() && man.Features.Kind != shard.FeatureAttributes {
		return nil, fmt.Errorf("loader: unknown feature kind %q", man.Features.Kind)
	}
	ds := &dataset{r: r, man: man, sizes: make([]aug.Size, r.NumGraphs())}
	var deg []int32
	for id := range ds.sizes {
		g, err := r.Graph(int64(id))
		if err != nil {
			return nil, err
		}
		ds.sizes[id], deg = aug.SizeOf(g.NumNodes, g.Edges, deg)
	}
	return ds.subset(served)
}

// Subset serves another set of the same shards, sharing the sizes and the
// index cache (a daemon's views of one dataset).
func (s *Source) Subset(served []int64) (*Source, error) { return s.ds.subset(served) }

func (ds *dataset) subset(served []int64) (*Source, error) {
	n := ds.r.NumGraphs()
	if served == nil {
		served = make([]int64, n)
		for i := range served {
			served[i] = int64(i)
		}
	}
	s := &Source{ds: ds, served: served}
	h := sha256.New()
	var b [8]byte
	for _, id := range served {
		if id < 0 || id >= int64(n) {
			return nil, fmt.Errorf("loader: served graph %d out of range 0..%d", id, n-1)
		}
		s.maxEdges = max(s.maxEdges, ds.sizes[id].Edges)
		binary.LittleEndian.PutUint64(b[:], uint64(id))
		h.Write(b[:])
	}
	s.digest = hex.EncodeToString(h.Sum(nil))
	return s, nil
}

// EnableIndex makes Load attach each graph's aug.Index, built once on
// first use (NodeSam then skips its per-draw neighbourhood passes). Costs
// up to 4 int32 per edge of memory for the graphs that are indexed; shared
// by every Source of the dataset.
func (s *Source) EnableIndex() {
	if s.ds.index.Load() == nil {
		ix := make([]atomic.Pointer[aug.Index], s.ds.r.NumGraphs())
		s.ds.index.CompareAndSwap(nil, &ix)
	}
}

// EnablePPRCache lets SubMix keep each graph's PageRank rankings, up to
// limit bytes for the dataset (aug.PPRCache; the indexes carry them, so it
// takes effect with EnableIndex). Call before serving.
func (s *Source) EnablePPRCache(limit int64) {
	if limit > 0 {
		s.ds.ppr.CompareAndSwap(nil, aug.NewPPRCache(limit))
	}
}

// PPRCache returns the dataset's SubMix ranking cache, or nil.
func (s *Source) PPRCache() *aug.PPRCache { return s.ds.ppr.Load() }

// Served returns the served graph ids (callers must not modify them).
func (s *Source) Served() []int64 { return s.served }

// ServedDigest is the SHA-256 of the served ids (int64 little endian, in
// order): part of a configuration's identity.
func (s *Source) ServedDigest() string { return s.digest }

// Manifest returns the shard manifest.
func (s *Source) Manifest() *shard.Manifest { return s.ds.man }

// Size returns graph id's size (nodes, undirected edges, largest degree).
func (s *Source) Size(id int64) aug.Size { return s.ds.sizes[id] }

// Bound is the largest size op can give graph id (aug.Bound, with the
// served set's largest graph as SubMix's partner bound).
func (s *Source) Bound(op aug.Op, id int64) aug.Size {
	return aug.Bound(op, s.ds.sizes[id], s.maxEdges)
}

// Load writes graph id into g as an op's input, reusing g's feature
// buffers. g.Edges is the shard's own memory, not a copy (ops never modify
// their input, and copying the edges cost ~7% of a NodeSam epoch): g must
// only be read, never be an op's output or a CopyFrom target. Its
// capacity ends with the graph, so an append copies.
func (s *Source) Load(id int64, g *aug.Graph) error {
	sg, err := s.ds.r.Graph(id)
	if err != nil {
		return err
	}
	g.ID, g.N, g.Label, g.MixLabel, g.Q = sg.ID, sg.NumNodes, sg.Label, sg.Label, 1
	g.Edges = sg.Edges[:len(sg.Edges):len(sg.Edges)]
	man := s.ds.man
	if man.Features.Kind.Categorical() {
		g.SetCodes(sg.Codes, int32(man.Features.Dim))
	} else {
		g.SetDense(sg.X, int32(man.Features.Dim))
	}
	g.Index = nil
	if idx := s.ds.index.Load(); idx != nil {
		slot := &(*idx)[id]
		ix := slot.Load()
		if ix == nil {
			// Two workers may build the same index at once: both results
			// are equal, the first stored wins.
			built := aug.BuildIndex(g)
			built.EnablePPR(s.ds.ppr.Load())
			slot.CompareAndSwap(nil, built)
			ix = slot.Load()
		}
		g.Index = ix
	}
	return nil
}

// Partner implements aug.Partners: uniform over the whole served set minus
// the target (not one rank's part), drawn from the target's own stream.
func (s *Source) Partner(target int64, r aug.Rand, into *aug.Graph) error {
	n := len(s.served)
	if n < 2 {
		return fmt.Errorf("loader: submix needs at least two served graphs, have %d", n)
	}
	i := r.IntN(n - 1)
	if s.served[i] == target {
		i = n - 1 // the draw skipped over the target's position
	}
	return s.Load(s.served[i], into)
}
