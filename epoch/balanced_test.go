package epoch_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/augloader/augloader/epoch"
)

// sizesOf gives structure-like sizes: atoms 20..150, edges ~24 per atom.
func sizesOf(n int, seed uint64) epoch.SizeFunc {
	r := rand.New(rand.NewPCG(seed, 1))
	nodes, edges := make([]int, n), make([]int, n)
	for i := range n {
		nodes[i] = 20 + r.IntN(130)
		edges[i] = nodes[i] * (18 + r.IntN(12))
	}
	return func(id int64) (int, int) { return nodes[id], edges[id] }
}

// Balanced budget batches: every rank has as many batches; each batch is
// within the budgets (a graph larger alone is alone); a step's batches are
// within its largest graph's atoms of each other (longest processing time
// first); every graph is delivered once in an epoch; and the cut depends
// only on (order, world, budget).
func TestBalancedBatches(t *testing.T) {
	const n = 2000
	size := sizesOf(n, 3)
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	perm := epoch.Permutation(7, 0, ids)
	for _, world := range []int{1, 2, 3, 8, 17} {
		for _, b := range []epoch.Budget{{Graphs: 64, Nodes: 2000}, {Graphs: 64, Nodes: 1500, Edges: 30000}, {Graphs: 4, Nodes: 100000}} {
			var all [][][]epoch.Item
			for r := range world {
				bs, err := epoch.BalancedSlice(perm, nil, r, world, b, size, epoch.Pad)
				if err != nil {
					t.Fatal(err)
				}
				again, _ := epoch.BalancedSlice(perm, nil, r, world, b, size, epoch.Pad)
				if !slices.EqualFunc(bs, again, slices.Equal) {
					t.Fatal("not deterministic")
				}
				all = append(all, bs)
				if len(bs) != len(all[0]) {
					t.Fatalf("world %d: rank %d has %d batches, rank 0 %d", world, r, len(bs), len(all[0]))
				}
			}
			seen := make([]int, n)
			var worst float64
			for s := range all[0] {
				lo, hi, biggest := 1<<30, 0, 0
				for r := range world {
					var nodes, edges int
					for _, it := range all[r][s] {
						nn, ne := size(it.Graph)
						nodes, edges = nodes+nn, edges+ne
						biggest = max(biggest, nn)
						if !it.Padded {
							seen[it.Graph]++
						}
					}
					if len(all[r][s]) > 1 && (b.Over(nodes, edges) || len(all[r][s]) > b.Graphs) {
						t.Fatalf("world %d step %d rank %d: %d graphs, %d nodes, %d edges over %+v", world, s, r, len(all[r][s]), nodes, edges, b)
					}
					lo, hi = min(lo, nodes), max(hi, nodes)
				}
				if s < len(all[0])-1 && hi-lo > biggest {
					t.Fatalf("world %d step %d: batches of %d..%d atoms, more apart than its largest graph (%d)", world, s, lo, hi, biggest)
				}
				if s < len(all[0])-1 && b.Nodes > 0 {
					worst = max(worst, float64(hi-lo)/float64(b.Nodes))
				}
			}
			for id, c := range seen {
				if c != 1 {
					t.Fatalf("world %d, budget %+v: graph %d delivered %d times", world, b, id, c)
				}
			}
			t.Logf("world %d budget %+v: %d steps, worst spread %.1f%% of the budget", world, b, len(all[0]), 100*worst)
		}
	}
}

// The resume model, extended to balanced batches: an epoch stopped at any
// point at world W (each rank at its own batch, as ranks are when killed)
// and resumed at world W' (several times over) delivers every graph exactly
// once across its phases, whatever the worlds.
func TestBalancedResume(t *testing.T) {
	const n = 700
	size := sizesOf(n, 5)
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	perm := epoch.Permutation(1, 4, ids)
	b := epoch.Budget{Graphs: 32, Nodes: 1200, Edges: 30000}
	r := rand.New(rand.NewPCG(9, 9))
	for trial := range 60 {
		var phases []epoch.Phase
		seen := make([]int, n)
		for len(phases) < 1+trial%4 {
			world := 1 + r.IntN(6)
			ph := epoch.Phase{World: world, Graphs: make([]int, world)}
			for rank := range world {
				bs, err := epoch.BalancedSlice(perm, phases, rank, world, b, size, epoch.Pad)
				if err != nil {
					t.Fatal(err)
				}
				// Stopped after some batches, each rank at its own.
				stop := r.IntN(len(bs) + 1)
				for _, bt := range bs[:stop] {
					for _, it := range bt {
						if !it.Padded {
							seen[it.Graph]++
						}
						ph.Graphs[rank]++
					}
				}
			}
			phases = append(phases, ph)
		}
		world := 1 + r.IntN(6)
		for rank := range world {
			bs, err := epoch.BalancedSlice(perm, phases, rank, world, b, size, epoch.Pad)
			if err != nil {
				t.Fatal(err)
			}
			for _, bt := range bs {
				for _, it := range bt {
					if !it.Padded {
						seen[it.Graph]++
					}
				}
			}
		}
		for id, c := range seen {
			if c != 1 {
				t.Fatalf("trial %d (phases %+v, then world %d): graph %d delivered %d times", trial, phases, world, id, c)
			}
		}
	}
}
