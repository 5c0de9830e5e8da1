// Package epoch says what an epoch is, as pure functions of the
// configuration: the per-epoch permutation of the served graphs, the slice
// each rank gets, the batches, and the augmentation policy of every graph.
//
// Contract: everything here is a pure function of (seed, epoch, served set,
// world size, batch size, schedule). Rank r of W gets positions r, r+W,
// r+2W, … of one global permutation (PyTorch's DistributedSampler layout),
// so the union of the ranks is the epoch whatever W is, and a graph's
// augmentation, keyed by (seed, epoch, graph id, operation), does not depend
// on W either. Resume phases (ResumeSlice) continue an epoch begun at other
// world sizes: the graphs no earlier rank received are dealt to the new
// ranks, each graph exactly once over the phases. A windowed shuffle
// (WindowPermutation) permutes blocks of pages, then graphs within windows
// of blocks, so a pass reads a window's pages together; SubMix then draws
// partners within the target's window. Batches cuts a slice under graph,
// node and edge budgets; Pick and Cumulative choose among weighted sets
// (twin sets) by a keyed draw. Safe for concurrent use.
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
	return rankSlice(perm, nil, rank, world, rem)
}

// rankSlice cuts rank's items from seq, the graphs of the epoch's positions
// pos (nil: positions 0, 1, …): items r, r+W, … of seq, padded or dropped
// to a multiple of W as rem says.
func rankSlice(seq []int64, pos []int, rank, world int, rem Remainder) ([]Item, error) {
	if world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("%w: rank %d of world size %d", ErrRange, rank, world)
	}
	n := len(seq)
	total, err := sliceTotal(n, world, rem)
	if err != nil || n == 0 {
		return nil, err
	}
	items := make([]Item, 0, total/world)
	for i := rank; i < total; i += world {
		p := i
		if pos != nil {
			p = pos[i%n]
		}
		items = append(items, Item{Graph: seq[i%n], Position: p, Padded: i >= n})
	}
	return items, nil
}

// sliceTotal is the number of items W ranks share out of n: n rounded up
// to a multiple of W (Pad) or down (Drop).
func sliceTotal(n, world int, rem Remainder) (int, error) {
	switch rem {
	case Pad:
		return (n + world - 1) / world * world, nil
	case Drop:
		return n - n%world, nil
	}
	return 0, fmt.Errorf("epoch: unknown remainder %q (want pad or drop)", rem)
}

// Phase is an earlier part of a resumed epoch: rank r of World ranks
// received the first Graphs[r] items of its slice (padded repeats
// included).
type Phase struct {
	World  int
	Graphs []int
}

// ResumeSlice returns rank's items of what is left of the epoch perm after
// phases, for world size W. The first phase's ranks sliced perm as
// RankSlice does; each later one sliced the positions the phases before it
// left, in the epoch's order; this request slices what they all left.
// Every graph of the epoch is so delivered once across the phases (less
// what Drop leaves out of the last one), whatever the world sizes, and an
// item keeps its position in perm. A count larger than its rank's slice
// is ErrRange.
func ResumeSlice(perm []int64, phases []Phase, rank, world int, rem Remainder) ([]Item, error) {
	pos := make([]int, len(perm))
	for i := range pos {
		pos[i] = i
	}
	for k, ph := range phases {
		n := len(pos)
		if ph.World < 1 || len(ph.Graphs) != ph.World {
			return nil, fmt.Errorf("%w: resume phase %d: %d graph counts for a world of %d", ErrRange, k, len(ph.Graphs), ph.World)
		}
		total, err := sliceTotal(n, ph.World, rem)
		if err != nil {
			return nil, err
		}
		per := total / ph.World
		for r, g := range ph.Graphs {
			if g < 0 || g > per {
				return nil, fmt.Errorf("%w: resume phase %d: rank %d of %d received %d graphs, its slice has %d", ErrRange, k, r, ph.World, g, per)
			}
		}
		// Index i of the phase went to rank i mod W as its (i div W)-th
		// item; it was delivered when that is below the rank's count.
		// Indices past n were padded repeats.
		kept := pos[:0]
		for i, p := range pos {
			if i/ph.World >= ph.Graphs[i%ph.World] {
				kept = append(kept, p)
			}
		}
		pos = kept
	}
	seq := make([]int64, len(pos))
	for i, p := range pos {
		seq[i] = perm[p]
	}
	return rankSlice(seq, pos, rank, world, rem)
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
