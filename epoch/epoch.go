// Package epoch says what an epoch is, as pure functions of the
// configuration: the per-epoch permutation of the served graphs, the slice
// each rank gets, the batches, and the augmentation policy of every graph.
//
// Contract: everything here is a pure function of (seed, epoch, served set,
// world size, batch size, schedule). Rank r of W gets positions r, r+W,
// r+2W, … of one global permutation (PyTorch's DistributedSampler layout),
// so the union of the ranks is the epoch whatever W is, and a graph's
// augmentation, keyed by (seed, epoch, graph id, operation), does not depend
// on W either. Safe for concurrent use.
package epoch

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/augloader/augloader/aug"
)

// ErrRange: a request outside what the configuration offers.
var ErrRange = errors.New("epoch: out of range")

// Remainder says what happens when the served set does not divide by W.
type Remainder string

// Remainder modes.
const (
	// Pad repeats the first graphs of the permutation so every rank gets
	// the same count; repeated entries are marked padded (PyTorch's
	// drop_last=False).
	Pad Remainder = "pad"
	// Drop leaves out the last graphs of the permutation (drop_last=True).
	Drop Remainder = "drop"
)

// Permutation returns the served ids in the order of epoch e: a
// Fisher–Yates shuffle keyed by (seed, epoch).
func Permutation(seed, e uint64, served []int64) []int64 {
	a, b := aug.Stream(seed, e, -1, aug.StreamPermutation)
	r := rand.New(rand.NewPCG(a, b))
	p := append([]int64(nil), served...)
	for i := len(p) - 1; i > 0; i-- {
		j := r.IntN(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// Item is one graph of a rank's slice.
type Item struct {
	Graph    int64 // graph id in the shards
	Position int   // position in the global permutation
	Padded   bool  // a repeat added to even out the ranks
	// Pass keys the graph's augmentation draws (seed, pass, graph, op):
	// the epoch, or with fixed batches per epoch the pass over the served
	// set the graph was drawn in.
	Pass uint64
}

// RankSlice returns rank's items of the permutation perm for world size W.
func RankSlice(perm []int64, rank, world int, rem Remainder) ([]Item, error) {
	if world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("%w: rank %d of world size %d", ErrRange, rank, world)
	}
	n := len(perm)
	total := n - n%world // Drop
	if rem == Pad {
		total = (n + world - 1) / world * world
	} else if rem != Drop {
		return nil, fmt.Errorf("epoch: unknown remainder %q (want pad or drop)", rem)
	}
	if n == 0 {
		return nil, nil
	}
	items := make([]Item, 0, total/world)
	for pos := rank; pos < total; pos += world {
		items = append(items, Item{Graph: perm[pos%n], Position: pos, Padded: pos >= n})
	}
	return items, nil
}

// Budget caps a batch: at most Graphs graphs, and (when non-zero) at most
// Nodes nodes and Edges undirected edges, counted as the size function
// given to Batches says (the loader counts each graph at the bound of its
// augmentation, so the budget holds for what is sent); a graph larger
// than a budget alone forms its own batch.
type Budget struct {
	Graphs, Nodes, Edges int
}

// Over reports whether a batch of nodes and edges exceeds the budget.
func (b Budget) Over(nodes, edges int) bool {
	return (b.Nodes > 0 && nodes > b.Nodes) || (b.Edges > 0 && edges > b.Edges)
}

// Batches cuts items into batches under the budget, in order; size(i)
// gives items[i]'s (nodes, edges) and is needed only with a node or edge
// budget.
func Batches(items []Item, b Budget, size func(i int) (nodes, edges int)) ([][]Item, error) {
	if b.Graphs < 1 {
		return nil, fmt.Errorf("epoch: batch size %d is not positive", b.Graphs)
	}
	if (b.Nodes > 0 || b.Edges > 0) && size == nil {
		return nil, errors.New("epoch: node or edge budget needs graph sizes")
	}
	var out [][]Item
	var cur []Item
	var nodes, edges int
	for i, it := range items {
		var nn, ne int
		if size != nil && (b.Nodes > 0 || b.Edges > 0) {
			nn, ne = size(i)
		}
		full := len(cur) == b.Graphs ||
			(len(cur) > 0 && b.Nodes > 0 && nodes+nn > b.Nodes) ||
			(len(cur) > 0 && b.Edges > 0 && edges+ne > b.Edges)
		if full {
			out = append(out, cur)
			cur, nodes, edges = nil, 0, 0
		}
		cur = append(cur, it)
		nodes += nn
		edges += ne
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out, nil
}
