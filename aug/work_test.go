package aug_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/augloader/augloader/aug"
)

// allocated is what f allocates (bytes, garbage included).
func allocated(f func()) int64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return int64(b.TotalAlloc - a.TotalAlloc)
}

// sparseGraph is a graph of n nodes and about m random edges, built in
// O(m log m) (randomGraph's rejection sampling is for small graphs).
func sparseGraph(r *rand.Rand, id int64, n, m int, feat string) aug.Graph {
	keys := make([]uint64, 0, m)
	for range m {
		u, v := r.IntN(n), r.IntN(n)
		if u == v {
			continue
		}
		keys = append(keys, uint64(min(u, v))<<32|uint64(max(u, v)))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	g := aug.Graph{ID: id, N: int32(n), Q: 1}
	for _, k := range keys {
		g.Edges = append(g.Edges, int32(k>>32), int32(k&(1<<32-1)))
	}
	switch feat {
	case "codes":
		codes := make([]int32, n)
		for i := range codes {
			codes[i] = int32(r.IntN(5))
		}
		g.SetCodes(codes, 5)
	case "dense":
		x := make([]float32, 3*n)
		for i := range x {
			x[i] = r.Float32()
		}
		g.SetDense(x, 3)
	}
	return g
}

// Work bounds what every op allocates, indexed or not, with or without
// features, on graphs that declare far more nodes than edges and on dense
// ones (the loader charges it to --memory-budget and refuses a graph it
// could never fit); IndexBytes bounds the index and its PageRank table.
func TestWorkBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	shapes := []struct {
		n, m int
		feat string
	}{{60000, 3, ""}, {60000, 3, "codes"}, {30000, 30000, "dense"}, {1500, 60000, "codes"}, {800, 30000, ""}, {5, 4, "codes"}}
	featBytes := map[string]aug.FeatureBytes{"": {}, "codes": {Node: 12}, "dense": {Node: 12}}
	for _, sh := range shapes {
		g := sparseGraph(r, 0, sh.n, sh.m, sh.feat)
		p := sparseGraph(r, 1, sh.n, sh.m, sh.feat)
		size, _ := aug.SizeOf(g.N, g.Edges, nil)
		for _, indexed := range []bool{false, true} {
			in, part := g, p
			if indexed {
				var ix *aug.Index
				got := allocated(func() {
					ix = aug.BuildIndex(&in)
					ix.EnablePPR(aug.NewPPRCache(64 << 20))
				})
				if got > aug.IndexBytes(size) {
					t.Errorf("%d nodes, %d edges: the index allocated %d bytes, IndexBytes %d", size.Nodes, size.Edges, got, aug.IndexBytes(size))
				}
				in.Index = ix
				pix := aug.BuildIndex(&part)
				pix.EnablePPR(aug.NewPPRCache(64 << 20))
				part.Index = pix
			}
			for _, op := range allOps(onePartner{part}) {
				name := fmt.Sprintf("%s n=%d m=%d %s indexed=%v", op.Spec().Name, size.Nodes, size.Edges, sh.feat, indexed)
				var s aug.Scratch
				var out aug.Graph
				got := allocated(func() {
					if err := op.Apply(&in, &out, s.Rand(1, 2, 0, aug.OpID(op)), &s); err != nil {
						t.Fatal(err)
					}
				})
				if w := aug.Work(op, size, featBytes[sh.feat], size); got > w {
					t.Errorf("%s: allocated %d bytes, Work %d", name, got, w)
				}
			}
		}
	}
}
