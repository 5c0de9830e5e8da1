// Package loader turns shards into a stream of augmented, PyG-ready Arrow
// record batches: a worker pool reads graphs through shard.Reader, applies
// the epoch's policy (package epoch) with package aug, and collates each
// training batch into one record batch (docs/protocol.md, "Batch schema").
//
// Contract: the record batches of a request are a pure function of the
// configuration and the request (epoch, rank, world size, batch size, start
// batch): byte-identical whatever the number of workers or the scheduling.
// Output is strictly in batch order; at most Window batches are in flight,
// so a slow consumer never grows memory; a cancelled context stops the pool.
// A Loader is safe for concurrent use by many requests.
package loader

import (
	"fmt"
	"sync/atomic"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/shard"
)

// Source reads graphs as aug.Graphs and serves SubMix's partners.
type Source struct {
	r      *shard.Reader
	man    *shard.Manifest
	served []int64
	// index[id] is graph id's aug.Index, built on first use when enabled.
	index []atomic.Pointer[aug.Index]
}

// EnableIndex makes Load attach each graph's aug.Index, built once on
// first use (NodeSam then skips its per-draw neighbourhood passes). Costs
// up to 4 int32 per edge of memory for the graphs that are indexed.
func (s *Source) EnableIndex() {
	if s.index == nil {
		s.index = make([]atomic.Pointer[aug.Index], s.r.NumGraphs())
	}
}

// NewSource serves the graphs in served (all graphs when nil).
func NewSource(r *shard.Reader, served []int64) (*Source, error) {
	man := r.Manifest()
	if !man.Features.Kind.Categorical() && man.Features.Kind != shard.FeatureAttributes {
		return nil, fmt.Errorf("loader: unknown feature kind %q", man.Features.Kind)
	}
	if served == nil {
		served = make([]int64, r.NumGraphs())
		for i := range served {
			served[i] = int64(i)
		}
	}
	for _, id := range served {
		if id < 0 || id >= int64(r.NumGraphs()) {
			return nil, fmt.Errorf("loader: served graph %d out of range 0..%d", id, r.NumGraphs()-1)
		}
	}
	return &Source{r: r, man: man, served: served}, nil
}

// Served returns the served graph ids (callers must not modify them).
func (s *Source) Served() []int64 { return s.served }

// Manifest returns the shard manifest.
func (s *Source) Manifest() *shard.Manifest { return s.man }

// Load writes graph id into g as an op's input, reusing g's feature
// buffers. g.Edges is the shard's own memory, not a copy (ops never modify
// their input, and copying the edges cost ~7% of a NodeSam epoch): g must
// only be read, never be an op's output or a CopyFrom target. Its
// capacity ends with the graph, so an append copies.
func (s *Source) Load(id int64, g *aug.Graph) error {
	sg, err := s.r.Graph(id)
	if err != nil {
		return err
	}
	g.ID, g.N, g.Label, g.MixLabel, g.Q = sg.ID, sg.NumNodes, sg.Label, sg.Label, 1
	g.Edges = sg.Edges[:len(sg.Edges):len(sg.Edges)]
	if s.man.Features.Kind.Categorical() {
		g.SetCodes(sg.Codes, int32(s.man.Features.Dim))
	} else {
		g.SetDense(sg.X, int32(s.man.Features.Dim))
	}
	g.Index = nil
	if s.index != nil {
		ix := s.index[id].Load()
		if ix == nil {
			// Two workers may build the same index at once: both results
			// are equal, the first stored wins.
			s.index[id].CompareAndSwap(nil, aug.BuildIndex(g))
			ix = s.index[id].Load()
		}
		g.Index = ix
	}
	return nil
}

// GraphSize implements epoch.Sizes.
func (s *Source) GraphSize(id int64) (int, int) {
	sg, err := s.r.Graph(id)
	if err != nil {
		return 0, 0
	}
	return int(sg.NumNodes), sg.NumEdges()
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
