package aug_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/testutil"
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
		gs = append(gs, randomGraph(r, int64(1000+n), n, int(n)*int(n)/3))
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

// indexEqual checks that ops give byte-identical outputs with and without
// the index, over several draws per graph.
func indexEqual(t *testing.T, gs []aug.Graph, draws int) {
	t.Helper()
	ops := []aug.Op{aug.NodeSam{}, aug.NodeSamBase{}, aug.SplitOnly{}}
	var s1, s2 aug.Scratch
	var a, b aug.Graph
	for i := range gs {
		plain := gs[i]
		plain.Index = nil
		indexed := gs[i]
		indexed.Index = aug.BuildIndex(&indexed)
		for k := range draws {
			for _, op := range ops {
				op.Apply(&plain, &a, s1.Rand(3, uint64(k), plain.ID, aug.OpID(op)), &s1)
				op.Apply(&indexed, &b, s2.Rand(3, uint64(k), plain.ID, aug.OpID(op)), &s2)
				if !bytes.Equal(a.AppendBinary(nil), b.AppendBinary(nil)) {
					t.Fatalf("%s graph %d draw %d: the index changes the output", op.Spec().Name, plain.ID, k)
				}
				if b.Index != nil {
					t.Fatal("an output carries an index")
				}
			}
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
	for _, ds := range propertyDatasets {
		t.Run(ds.name, func(t *testing.T) {
			if ds.heavy && (testutil.RaceEnabled || testing.Short()) {
				t.Skip("large dataset: skipped under -race or -short (make test runs it without)")
			}
			d := loadDataset(t, ds.name, ds.path)
			indexEqual(t, d.graphs, 3)
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
