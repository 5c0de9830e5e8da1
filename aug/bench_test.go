package aug_test

// Benchmarks of every policy on COLLAB- and MUTAG-shaped graphs, and the
// scaling of NodeSam and SubMix with the number of edges (subgraphs of the
// synthetic Reddit-scale graph). Compare runs with benchstat:
//
//	go test -run XXX -bench . -benchmem -count 6 ./aug | tee new.txt
//	benchstat old.txt new.txt
//
// The scaling figure in docs/ is drawn by `go run ./bench/scaleplot` from
// the BenchmarkScaling lines.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/ingest/synth"
)

// fromAdj turns sorted adjacency lists into a canonical aug.Graph with
// one-hot degree-ish codes (dim 8).
func fromAdj(id int64, label int, adj [][]int32) aug.Graph {
	g := aug.Graph{ID: id, N: int32(len(adj)), Label: int32(label), Q: 1}
	for u, ns := range adj {
		for _, v := range ns {
			if int32(u) < v {
				g.Edges = append(g.Edges, int32(u), v)
			}
		}
	}
	codes := make([]int32, g.N)
	for i := range codes {
		codes[i] = int32(min(len(adj[i]), 7))
	}
	g.SetCodes(codes, 8)
	return g
}

var (
	collabOnce sync.Once
	collabGs   []aug.Graph
	mutagGs    []aug.Graph
	redditGs   []aug.Graph
)

// shapes: 300 COLLAB-shaped graphs from the generator (≈74 nodes, ≈2,457
// edges on average) and 300 MUTAG-shaped molecules (10–28 nodes, a tree plus
// one or two ring closures: ≈18 nodes, ≈20 edges).
func shapes(b *testing.B) ([]aug.Graph, []aug.Graph, []aug.Graph) {
	collabOnce.Do(func() {
		for _, like := range []struct {
			name string
			n    int
			into *[]aug.Graph
		}{{"COLLAB", 300, &collabGs}, {"REDDIT-BINARY", 200, &redditGs}} {
			spec, _ := synth.Like(like.name)
			err := synth.Generate(context.Background(), spec.Scaled(like.n), 1, func(id, class int, adj [][]int32) error {
				*like.into = append(*like.into, fromAdj(int64(id), class, adj))
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		r := rand.New(rand.NewPCG(5, 5))
		for id := range 300 {
			n := 10 + r.IntN(19)
			adj := make([][]int32, n)
			link := func(u, v int) {
				for _, w := range adj[u] {
					if int(w) == v {
						return
					}
				}
				adj[u] = append(adj[u], int32(v))
				adj[v] = append(adj[v], int32(u))
			}
			for v := 1; v < n; v++ {
				link(v, max(0, v-1-r.IntN(2)))
			}
			for range 1 + r.IntN(2) {
				if u, v := r.IntN(n), r.IntN(n); u != v {
					link(u, v)
				}
			}
			for u := range adj {
				sortInt32(adj[u])
			}
			mutagGs = append(mutagGs, fromAdj(int64(id), r.IntN(2), adj))
		}
	})
	return collabGs, mutagGs, redditGs
}

func sortInt32(s []int32) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func BenchmarkPolicies(b *testing.B) {
	collab, mutag, reddit := shapes(b)
	for _, shape := range []struct {
		name string
		gs   []aug.Graph
	}{{"collab", collab}, {"mutag", mutag}, {"reddit-binary", reddit}} {
		indexed := make([]aug.Graph, len(shape.gs))
		cached := make([]aug.Graph, len(shape.gs))
		cache := aug.NewPPRCache(1 << 30)
		for i := range indexed {
			indexed[i] = shape.gs[i]
			indexed[i].Index = aug.BuildIndex(&indexed[i])
			cached[i] = shape.gs[i]
			cached[i].Index = aug.BuildIndex(&cached[i])
			cached[i].Index.EnablePPR(cache)
		}
		ops := allOps(uniformPartners{shape.gs})
		names := make([]string, len(ops))
		sets := make([][]aug.Graph, len(ops))
		for i, op := range ops {
			names[i] = op.Spec().Name
			sets[i] = shape.gs
		}
		// NodeSam and its split-based ablations again on graphs carrying
		// their Index, as the loader serves them; SubMix on indexed graphs
		// (partners too), cold, and with every root's PageRank ranking
		// cached — the state a long run approaches as its draws visit the
		// roots (docs/bench.md gives the hit rate by epoch).
		for _, op := range []aug.Op{aug.NodeSam{}, aug.NodeSamBase{}, aug.SplitOnly{}} {
			ops, names, sets = append(ops, op), append(names, op.Spec().Name+"+index"), append(sets, indexed)
		}
		ops = append(ops, aug.SubMix{P: 0.4, Partners: indexedPartners{indexed}}, aug.SubMix{P: 0.4, Partners: indexedPartners{cached}})
		names = append(names, "submix+index", "submix+index+cache")
		sets = append(sets, indexed, cached)
		var s aug.Scratch
		for i := range cached {
			aug.WarmPPR(&cached[i], 0.4, false, &s)
		}
		for oi, op := range ops {
			graphs := sets[oi]
			b.Run(fmt.Sprintf("shape=%s/policy=%s", shape.name, names[oi]), func(b *testing.B) {
				var s aug.Scratch
				var out aug.Graph
				var edges int64
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					g := &graphs[i%len(graphs)]
					edges += int64(g.NumEdges())
					if err := op.Apply(g, &out, s.Rand(1, uint64(i/len(graphs)), g.ID, aug.OpID(op)), &s); err != nil {
						b.Fatal(err)
					}
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N)/sec, "graphs/s")
				b.ReportMetric(float64(edges)/sec, "edges/s")
			})
		}
	}
}

// BenchmarkBuildIndex: the one-off cost of a graph's Index.
func BenchmarkBuildIndex(b *testing.B) {
	collab, mutag, reddit := shapes(b)
	for _, shape := range []struct {
		name string
		gs   []aug.Graph
	}{{"collab", collab}, {"mutag", mutag}, {"reddit-binary", reddit}} {
		b.Run("shape="+shape.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				aug.BuildIndex(&shape.gs[i%len(shape.gs)])
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "graphs/s")
		})
	}
}

var (
	redditOnce sync.Once
	redditAdj  [][]int32
)

// ScalingSizes are the target edge counts of the nine subgraphs.
var ScalingSizes = []int{1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7}

var (
	bfsOrder []int32 // nodes of the synthetic Reddit graph in BFS order
	bfsPos   []int32 // position of each node in bfsOrder
	prefixE  []int   // prefixE[L]: edges induced by the first L nodes
)

// subgraph returns the subgraph of the synthetic Reddit graph induced by
// the shortest BFS prefix (from node seed) holding at least target edges:
// connected, so SubMix's root component is the whole subgraph.
func subgraph(b *testing.B, target int, seed uint64) aug.Graph {
	redditOnce.Do(func() {
		spec, _ := synth.Like("reddit")
		start := time.Now()
		err := synth.Generate(context.Background(), spec, 0, func(_, _ int, adj [][]int32) error {
			redditAdj = make([][]int32, len(adj))
			for u := range adj {
				redditAdj[u] = append([]int32(nil), adj[u]...)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("synthetic reddit graph (seed 0) generated in %s", time.Since(start))
	})
	// BFS from a random node of degree ≥ 1, then prefix edge counts.
	r := rand.New(rand.NewPCG(seed, 99))
	root := r.IntN(len(redditAdj))
	for len(redditAdj[root]) == 0 {
		root = r.IntN(len(redditAdj))
	}
	n := len(redditAdj)
	bfsPos = make([]int32, n)
	for i := range bfsPos {
		bfsPos[i] = -1
	}
	bfsOrder = append(bfsOrder[:0], int32(root))
	bfsPos[root] = 0
	for h := 0; h < len(bfsOrder); h++ {
		for _, w := range redditAdj[bfsOrder[h]] {
			if bfsPos[w] < 0 {
				bfsPos[w] = int32(len(bfsOrder))
				bfsOrder = append(bfsOrder, w)
			}
		}
	}
	prefixE = append(prefixE[:0], 0)
	for L, u := range bfsOrder {
		back := 0
		for _, w := range redditAdj[u] {
			if int(bfsPos[w]) < L {
				back++
			}
		}
		prefixE = append(prefixE, prefixE[L]+back)
	}
	L := sort.SearchInts(prefixE, target)
	L = min(L, len(bfsOrder))
	adj := make([][]int32, L)
	for p := 0; p < L; p++ {
		for _, w := range redditAdj[bfsOrder[p]] {
			if q := bfsPos[w]; q >= 0 && int(q) < L {
				adj[p] = append(adj[p], q)
			}
		}
		sortInt32(adj[p])
	}
	return fromAdj(int64(seed), 0, adj)
}

// BenchmarkScaling: NodeSam and SubMix on connected subgraphs (BFS
// prefixes) of the synthetic Reddit-scale graph (232,965 nodes, 11,606,919
// edges) from 10^3 to 10^7 edges; ns/edge should stay flat (linear time).
func BenchmarkScaling(b *testing.B) {
	for _, target := range ScalingSizes {
		g := subgraph(b, target, 1)
		partner := subgraph(b, target, 2)
		for _, op := range []aug.Op{aug.NodeSam{}, aug.SubMix{P: 0.4, Partners: onePartner{partner}}} {
			b.Run(fmt.Sprintf("policy=%s/edges=%d", op.Spec().Name, target), func(b *testing.B) {
				work := float64(g.NumEdges())
				if _, ok := op.(aug.SubMix); ok {
					work += float64(partner.NumEdges())
				}
				benchApply(b, op, &g, work)
				b.ReportMetric(float64(g.NumEdges()), "edges")
				b.ReportMetric(float64(g.N), "nodes")
			})
		}
	}
}

// benchApply times op on g with reused scratch and output (grown once
// before the clock starts) and reports ns per unit of work (edges).
func benchApply(b *testing.B, op aug.Op, g *aug.Graph, work float64) {
	var s aug.Scratch
	var out aug.Graph
	if err := op.Apply(g, &out, s.Rand(1, 0, g.ID, aug.OpID(op)), &s); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := op.Apply(g, &out, s.Rand(1, uint64(i), g.ID, aug.OpID(op)), &s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/work, "ns/edge")
}

// BenchmarkGraphCLScaling: GraphCL's subgraph and attrmask on the scaling
// graphs: ns/edge flat across sizes is the linear time their docs claim
// (outside make bench's tables: go test -run XXX -bench GraphCLScaling ./aug).
func BenchmarkGraphCLScaling(b *testing.B) {
	for _, target := range ScalingSizes {
		g := subgraph(b, target, 1)
		for _, op := range []aug.Op{aug.Subgraph{Ratio: 0.8}, aug.AttrMask{Ratio: 0.2}} {
			b.Run(fmt.Sprintf("op=%s/edges=%d", op.Spec().Name, target), func(b *testing.B) {
				benchApply(b, op, &g, float64(g.NumEdges()))
			})
		}
	}
}
