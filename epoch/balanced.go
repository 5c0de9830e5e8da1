package epoch

import (
	"fmt"
	"slices"
)

// Balanced batches: an epoch cut into steps of W batches, one per rank,
// each under a node (atom) and edge budget and within one graph's size of
// each other (docs/schedule.md, "Balanced budgets"). A step takes the next
// graphs of the epoch's order, as many as W batches can hold, and packs
// them into W bins by their sizes (longest processing time first: each
// graph, largest first, into the bin with the fewest nodes so far), so the
// ranks of a step wait for each other no longer than one graph's share.
// Every rank has as many batches; a step is a contiguous run of the
// epoch's order, so what W ranks delivered after s steps is a prefix of
// it, and a resumed epoch (phases) re-cuts what is left at any world size.

// SizeFunc gives a graph's (nodes, edges) as a budget counts them.
type SizeFunc func(id int64) (nodes, edges int)

// balancedSteps cuts the graphs seq (at positions pos of the epoch) into
// steps of world batches under b: steps[s][r] is rank r's batch of step s,
// indices into seq. With Pad the last step's empty batches get repeats
// of the epoch's first graphs (marked padded by the caller: index ≥
// len(seq) means seq[index-len(seq)]); with Drop a last step that cannot
// give every rank a graph is left out.
func balancedSteps(seq []int64, world int, b Budget, size SizeFunc, rem Remainder) ([][][]int, error) {
	if world < 1 {
		return nil, fmt.Errorf("%w: world size %d", ErrRange, world)
	}
	if b.Graphs < 1 {
		return nil, fmt.Errorf("epoch: batch size %d is not positive", b.Graphs)
	}
	if rem != Pad && rem != Drop {
		return nil, fmt.Errorf("epoch: unknown remainder %q (want pad or drop)", rem)
	}
	type item struct {
		idx          int
		nodes, edges int
	}
	var steps [][][]int
	var group []item
	bins := make([]struct{ nodes, edges, n int }, world)
	order := make([]int, 0, 64)
	var assign []int // assign[i]: group[i]'s bin
	for next := 0; next < len(seq); {
		// The next graphs, as many as world batches may hold together.
		group = group[:0]
		var nodes, edges int
		for next+len(group) < len(seq) {
			nn, ne := size(seq[next+len(group)])
			if len(group) > 0 && (len(group) == world*b.Graphs ||
				(b.Nodes > 0 && nodes+nn > world*b.Nodes) || (b.Edges > 0 && edges+ne > world*b.Edges)) {
				break
			}
			group = append(group, item{next + len(group), nn, ne})
			nodes += nn
			edges += ne
		}
		// Pack them. A group whose packing puts a bin over a budget is cut
		// short, its tail left to the next step: the longest prefix that
		// packs, found by bisection (a single graph larger than the budget
		// alone fills a bin of its own).
		pack := func(k int) bool {
			order = order[:0]
			for i := range k {
				order = append(order, i)
			}
			slices.SortStableFunc(order, func(x, y int) int { return group[y].nodes - group[x].nodes })
			for j := range bins {
				bins[j] = struct{ nodes, edges, n int }{}
			}
			assign = slices.Grow(assign[:0], k)[:k]
			for _, i := range order {
				j := 0
				for c := 1; c < world; c++ {
					if bins[c].nodes < bins[j].nodes || (bins[c].nodes == bins[j].nodes && bins[c].n < bins[j].n) {
						j = c
					}
				}
				assign[i] = j
				bins[j].nodes += group[i].nodes
				bins[j].edges += group[i].edges
				bins[j].n++
				if bins[j].n > 1 && (bins[j].n > b.Graphs || b.Over(bins[j].nodes, bins[j].edges)) {
					return false
				}
			}
			return true
		}
		if !pack(len(group)) {
			lo, hi := 1, len(group) // lo packs (one graph always does), hi does not
			for hi-lo > 1 {
				if mid := (lo + hi) / 2; pack(mid) {
					lo = mid
				} else {
					hi = mid
				}
			}
			group = group[:lo]
			pack(lo)
		}
		step := make([][]int, world)
		for _, i := range order { // largest first within a batch: the order is the packing's
			step[assign[i]] = append(step[assign[i]], group[i].idx)
		}
		for r := range step {
			slices.Sort(step[r]) // within a batch, the epoch's order
		}
		next += len(group)
		steps = append(steps, step)
	}
	if n := len(steps); n > 0 {
		last := steps[n-1]
		empty := 0
		for _, bt := range last {
			if len(bt) == 0 {
				empty++
			}
		}
		switch {
		case empty > 0 && rem == Drop:
			steps = steps[:n-1]
		case empty > 0:
			pad := 0
			for r := range last {
				if len(last[r]) == 0 {
					last[r] = []int{len(seq) + pad%len(seq)}
					pad++
				}
			}
		}
	}
	return steps, nil
}

// BalancedSlice returns rank's batches of the epoch perm at world size
// world under budget b (see the package's balanced batches): what the
// phases (earlier parts of a resumed epoch, each cut the same way from
// what the ones before it left) did not deliver, cut into steps. Every
// rank gets as many batches; an item keeps its position in perm.
func BalancedSlice(perm []int64, phases []Phase, rank, world int, b Budget, size SizeFunc, rem Remainder) ([][]Item, error) {
	if world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("%w: rank %d of world size %d", ErrRange, rank, world)
	}
	pos := make([]int, len(perm))
	for i := range pos {
		pos[i] = i
	}
	seq := slices.Clone(perm)
	for k, ph := range phases {
		if ph.World < 1 || len(ph.Graphs) != ph.World {
			return nil, fmt.Errorf("%w: resume phase %d: %d graph counts for a world of %d", ErrRange, k, len(ph.Graphs), ph.World)
		}
		steps, err := balancedSteps(seq, ph.World, b, size, rem)
		if err != nil {
			return nil, err
		}
		delivered := make([]bool, len(seq))
		for r, g := range ph.Graphs {
			have := 0
			for _, st := range steps {
				have += len(st[r])
			}
			if g < 0 || g > have {
				return nil, fmt.Errorf("%w: resume phase %d: rank %d of %d received %d graphs, its slice has %d", ErrRange, k, r, ph.World, g, have)
			}
			for _, st := range steps {
				for _, i := range st[r] {
					if g == 0 {
						break
					}
					if i < len(seq) {
						delivered[i] = true
					}
					g--
				}
			}
		}
		var kept []int
		for i := range seq {
			if !delivered[i] {
				kept = append(kept, i)
			}
		}
		nseq, npos := make([]int64, len(kept)), make([]int, len(kept))
		for j, i := range kept {
			nseq[j], npos[j] = seq[i], pos[i]
		}
		seq, pos = nseq, npos
	}
	steps, err := balancedSteps(seq, world, b, size, rem)
	if err != nil {
		return nil, err
	}
	out := make([][]Item, len(steps))
	for s, st := range steps {
		for _, i := range st[rank] {
			padded := i >= len(seq)
			if padded {
				i -= len(seq)
			}
			out[s] = append(out[s], Item{Graph: seq[i], Position: pos[i], Padded: padded})
		}
	}
	return out, nil
}
