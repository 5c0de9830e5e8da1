package aug_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/testkit/testutil"
)

// bruteIndex counts, the slow way, each node's triangles and the
// neighbours sharing one with it.
func bruteIndex(g *aug.Graph) ([]int64, [][]int32) {
	n := int(g.N)
	adj := make([]map[int32]bool, n)
	for i := range adj {
		adj[i] = map[int32]bool{}
	}
	for k := 0; k < len(g.Edges); k += 2 {
		adj[g.Edges[k]][g.Edges[k+1]] = true
		adj[g.Edges[k+1]][g.Edges[k]] = true
	}
	tri := make([]int64, n)
	T := make([][]int32, n)
	for v := 0; v < n; v++ {
		for a := range adj[v] {
			shared := false
			for b := range adj[v] {
				if a < b && adj[a][b] {
					if a < b {
						tri[v]++
					}
				}
				if a != b && adj[a][b] {
					shared = true
				}
			}
			if shared {
				T[v] = append(T[v], a)
			}
		}
		slices.Sort(T[v])
	}
	return tri, T
}

func TestBuildIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	gs := corpus(200)
	for _, n := range []int32{1, 2, 3, 10, 60, 150, 1100, 1500} { // > 1,024: the merge method
		density := 3
		if testutil.RaceEnabled && n > 1000 {
			density = 30 // the brute-force oracle alone took 4 minutes under -race
		}
		gs = append(gs, randomGraph(r, int64(1000+n), n, int(n)*int(n)/density))
	}
	for i := range gs {
		g := &gs[i]
		ix := aug.BuildIndex(g)
		tri, T := bruteIndex(g)
		if !slices.Equal(ix.Tri, tri) {
			t.Fatalf("graph %d: triangles %v, want %v", g.ID, ix.Tri, tri)
		}
		for v := range T {
			got := ix.T[ix.TOff[v]:ix.TOff[v+1]]
			if !slices.Equal(got, T[v]) && !(len(got) == 0 && len(T[v]) == 0) {
				t.Fatalf("graph %d node %d: T %v, want %v", g.ID, v, got, T[v])
			}
			nb := ix.Adj[ix.Off[v]:ix.Off[v+1]]
			if !slices.IsSorted(nb) {
				t.Fatalf("graph %d node %d: neighbours unsorted", g.ID, v)
			}
		}
	}
}

// indexEqual: every op that reads the Index gives the same bytes with and
// without it — SubMix (with and without self-loops, the two variants'
// rankings in one cache) also with its PageRank rankings cached (a cache
// with room for all of them, and one with room for few, each draw of a
// graph after the first finding some cached). The small cache's pass
// runs SubMix alone over at most 300 graphs: the first pass has already
// covered the rest, and evictions show within a few hundred graphs.
func indexEqual(t *testing.T, gs []aug.Graph, draws int) {
	t.Helper()
	plainGs := make([]aug.Graph, len(gs))
	for _, limit := range []int64{1 << 30, 2 << 10} {
		cache := aug.NewPPRCache(limit)
		indexed := make([]aug.Graph, len(gs))
		for i := range gs {
			plainGs[i] = gs[i]
			plainGs[i].Index = nil
			indexed[i] = gs[i]
			indexed[i].Index = aug.BuildIndex(&indexed[i])
			indexed[i].Index.EnablePPR(cache)
		}
		ops1 := []aug.Op{aug.NodeSam{}, aug.NodeSamBase{}, aug.SplitOnly{}, aug.SubMix{P: 0.4, Partners: uniformPartners{plainGs}}, aug.SubMix{P: 0.7, Partners: uniformPartners{plainGs}}, aug.SubMix{P: 0.4, SelfLoops: true, Partners: uniformPartners{plainGs}}}
		ops2 := []aug.Op{aug.NodeSam{}, aug.NodeSamBase{}, aug.SplitOnly{}, aug.SubMix{P: 0.4, Partners: indexedPartners{indexed}}, aug.SubMix{P: 0.7, Partners: indexedPartners{indexed}}, aug.SubMix{P: 0.4, SelfLoops: true, Partners: indexedPartners{indexed}}}
		var s1, s2 aug.Scratch
		var a, b aug.Graph
		for k := range draws {
			for i := range gs {
				if limit < 1<<20 && i >= 300 {
					break
				}
				for oi := range ops1 {
					if len(gs) < 2 && oi >= 3 {
						continue // SubMix needs a partner
					}
					if limit < 1<<20 && oi < 3 {
						continue
					}
					op1, op2 := ops1[oi], ops2[oi]
					err1 := op1.Apply(&plainGs[i], &a, s1.Rand(3, uint64(k), gs[i].ID, aug.OpID(op1)), &s1)
					err2 := op2.Apply(&indexed[i], &b, s2.Rand(3, uint64(k), gs[i].ID, aug.OpID(op2)), &s2)
					if (err1 == nil) != (err2 == nil) {
						t.Fatalf("%s graph %d draw %d: errors %v, %v", op1.Spec().Name, gs[i].ID, k, err1, err2)
					}
					if !bytes.Equal(a.AppendBinary(nil), b.AppendBinary(nil)) {
						t.Fatalf("%s graph %d draw %d (cache limit %d): the index changes the output", op1.Spec().Name, gs[i].ID, k, limit)
					}
					if b.Index != nil {
						t.Fatal("an output carries an index")
					}
				}
			}
		}
		if limit > 1<<20 && draws > 1 && cache.Hits() == 0 && cache.Draws() > 0 {
			t.Fatalf("%d SubMix rankings asked of the cache, none found", cache.Draws())
		}
		if cache.Used() > limit {
			t.Fatalf("the cache holds %d bytes, over its limit %d", cache.Used(), limit)
		}
	}
}

func TestIndexSameOutputs(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	gs := corpus(150)
	for _, n := range []int32{40, 74, 120} {
		gs = append(gs, randomGraph(r, int64(2000+n), n, int(n)*int(n)/3))
	}
	indexEqual(t, gs, 20)
}

func TestIndexSameOutputsReal(t *testing.T) {
	testutil.NoRace(t)
	for _, ds := range propertyDatasets {
		t.Run(ds.name, func(t *testing.T) {
			if ds.heavy && (testutil.RaceEnabled || testing.Short()) {
				t.Skip("large dataset: skipped under -race or -short (make test runs it without)")
			}
			d := loadDataset(t, ds.name, ds.path)
			// Three draws of every graph and op on the small sets; one on
			// the large ones (COLLAB: 30,000 comparisons a draw), where
			// three took 29 of this test's 33 s.
			draws := 3
			if ds.heavy {
				draws = 1
			}
			indexEqual(t, d.graphs, draws)
			coalescedEqual(t, d.graphs, 1)
		})
	}
}

// A stale index (another graph's) is ignored, not trusted.
func TestIndexMismatchIgnored(t *testing.T) {
	gs := corpus(10)
	other := aug.BuildIndex(&gs[1])
	g := gs[0]
	g.Index = other
	if g.N == gs[1].N && len(g.Edges) == len(gs[1].Edges) {
		t.Skip("corpus graphs 0 and 1 have the same shape")
	}
	var s1, s2 aug.Scratch
	var a, b aug.Graph
	plain := gs[0]
	aug.NodeSam{}.Apply(&plain, &a, s1.Rand(1, 0, 0, aug.OpNodeSam), &s1)
	aug.NodeSam{}.Apply(&g, &b, s2.Rand(1, 0, 0, aug.OpNodeSam), &s2)
	if !bytes.Equal(a.AppendBinary(nil), b.AppendBinary(nil)) {
		t.Fatal("a mismatched index was used")
	}
}

// indexedPartners is uniformPartners whose partner keeps its Index, as the
// loader's Source.Load gives it.
type indexedPartners struct{ graphs []aug.Graph }

func (u indexedPartners) Partner(_ context.Context, target int64, r aug.Rand, into *aug.Graph) error {
	if len(u.graphs) < 2 {
		return fmt.Errorf("need two graphs")
	}
	i := int64(r.IntN(len(u.graphs) - 1)) // uniformPartners' draw
	if i >= target {
		i++
	}
	into.CopyFrom(&u.graphs[i])
	into.Index = u.graphs[i].Index
	return nil
}

// Scratch.Forget drops the request's context and SubMix's partner views
// (its edges and index), which a scratch kept between requests must not
// hold, and the scratch still works after it.
func TestScratchForget(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	graphs := make([]aug.Graph, 4)
	for i := range graphs {
		graphs[i] = testutil.DenseGraph(r, int64(i), 20+r.IntN(20), 0.3, 4)
		graphs[i].Index = aug.BuildIndex(&graphs[i])
	}
	op := aug.SubMix{P: 0.4, Partners: indexedPartners{graphs}}
	var s aug.Scratch
	var out aug.Graph
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for round := range 2 {
		s.SetContext(ctx)
		for i := range graphs {
			if err := op.Apply(&graphs[i], &out, s.Rand(1, uint64(round), graphs[i].ID, aug.OpID(op)), &s); err != nil {
				t.Fatal(err)
			}
		}
		if !aug.ScratchRefs(&s) {
			t.Fatal("no partner or context to forget: the test does not test")
		}
		s.Forget()
		if aug.ScratchRefs(&s) {
			t.Fatalf("round %d: the scratch keeps a context or a partner's views after Forget", round)
		}
	}
}
