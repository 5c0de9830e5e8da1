package loader

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/augloader/augloader/aug"
)

// randomCanonical returns a graph of n nodes with each canonical pair
// (u < v) present with probability p, sorted by (u, v) as aug emits them.
func randomCanonical(r *rand.Rand, n int, p float64) aug.Graph {
	g := aug.Graph{N: int32(n), FeatOff: make([]int32, n+1)}
	for u := 0; u < n; u++ {
		for v := u + 1; v < n; v++ {
			if r.Float64() < p {
				g.Edges = append(g.Edges, int32(u), int32(v))
			}
		}
	}
	return g
}

// TestAddEdgesCoalesced: both directions of every pair, offset by the
// batch base, ordered by (src, dst) — the reference sorts all directed
// pairs — for empty graphs, isolated nodes, stars, cliques and random
// graphs appended one after another into the same collator.
func TestAddEdgesCoalesced(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	star := aug.Graph{N: 6, Edges: []int32{0, 1, 0, 2, 0, 3, 0, 4, 0, 5}, FeatOff: make([]int32, 7)}
	tail := aug.Graph{N: 4, Edges: []int32{2, 3}, FeatOff: make([]int32, 5)}
	graphs := []aug.Graph{{N: 0, FeatOff: []int32{0}}, {N: 3, FeatOff: make([]int32, 4)}, star, tail, randomCanonical(r, 1, 1), randomCanonical(r, 5, 1)}
	for range 40 {
		graphs = append(graphs, randomCanonical(r, 1+r.IntN(60), r.Float64()))
	}
	var c collator
	for round := range 2 { // the second round reuses grown buffers
		c.reset(false)
		for i := range graphs {
			g := &graphs[i]
			base := c.base
			from := len(c.src)
			c.add(g, "none", false)
			type pair struct{ s, d int32 }
			var want, got []pair
			for k := 0; k < len(g.Edges); k += 2 {
				u, v := base+g.Edges[k], base+g.Edges[k+1]
				want = append(want, pair{u, v}, pair{v, u})
			}
			slices.SortFunc(want, func(a, b pair) int {
				if a.s != b.s {
					return int(a.s - b.s)
				}
				return int(a.d - b.d)
			})
			for k := from; k < len(c.src); k++ {
				got = append(got, pair{c.src[k], c.dst[k]})
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d graph %d (n=%d, %d pairs): got %v, want %v", round, i, g.N, len(g.Edges)/2, got, want)
			}
			if c.srcOff[len(c.srcOff)-1] != int32(len(c.src)) {
				t.Fatalf("graph %d: srcOff %v, %d edges", i, c.srcOff, len(c.src))
			}
		}
	}
}

// BenchmarkCollate: one batch of 32 COLLAB-sized random graphs (74 nodes,
// density 0.9 ≈ 2,460 pairs), collator reused as the loader reuses it.
func BenchmarkCollate(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	graphs := make([]aug.Graph, 32)
	pairs := 0
	for i := range graphs {
		graphs[i] = randomCanonical(r, 74, 0.9)
		pairs += len(graphs[i].Edges) / 2
	}
	var c collator
	b.ReportAllocs()
	for b.Loop() {
		c.reset(false)
		for i := range graphs {
			c.addEdges(&graphs[i])
			c.base += graphs[i].N
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*pairs), "ns/directed-edge")
}
