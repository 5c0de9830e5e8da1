package aug_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/testkit/testutil"
)

// TestSubgraphProperties: on random graphs (many disconnected), for each
// ratio, the subgraph view is connected; it keeps max(1, ⌊ratio·N⌋)
// nodes, or fewer only when it kept the seed's whole component; it is
// the subgraph its kept nodes induce in the input (every input edge
// between two kept nodes, no other); and every kept node carries its own
// features (X names the input node: id+1). Node ids keep their input
// order.
func TestSubgraphProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var s aug.Scratch
	var out aug.Graph
	for gid := range 300 {
		n := int32(1 + r.IntN(60))
		g := randomGraph(r, int64(gid), n, r.IntN(int(n)*2+1))
		in := identified(gid, g.N, g.Edges, nil, nil)
		for _, ratio := range []float64{0.2, 0.5, 0.9, 1} {
			op := aug.Subgraph{Ratio: ratio}
			if err := op.Apply(&in, &out, s.Rand(7, 1, in.ID, aug.OpSubgraph), &s); err != nil {
				t.Fatal(err)
			}
			if err := aug.Check(&out, 0); err != nil {
				t.Fatalf("graph %d ratio %v: %v", gid, ratio, err)
			}
			// Kept input nodes, from the features (X[0] = id + 1).
			kept := make([]int32, out.N)
			for v := range out.N {
				kept[v] = int32(out.X[3*v]) - 1
				if v > 0 && kept[v] <= kept[v-1] {
					t.Fatalf("graph %d: output ids not in input order: %v", gid, kept)
				}
				if out.NodeCat[2*v+1] != kept[v]%128 {
					t.Fatalf("graph %d: node %d's codes are not input node %d's", gid, v, kept[v])
				}
			}
			want := max(1, int(ratio*float64(n)))
			isKept := make([]bool, n)
			for _, v := range kept {
				isKept[v] = true
			}
			var induced []int32
			leaves := false
			for k := 0; k < len(in.Edges); k += 2 {
				u, v := in.Edges[k], in.Edges[k+1]
				switch {
				case isKept[u] && isKept[v]:
					induced = append(induced, int32(slices.Index(kept, u)), int32(slices.Index(kept, v)))
				case isKept[u] != isKept[v]:
					leaves = true
				}
			}
			if !slices.Equal(induced, out.Edges) {
				t.Fatalf("graph %d ratio %v: edges %v, the kept nodes induce %v", gid, ratio, out.Edges, induced)
			}
			switch {
			case int(out.N) > want:
				t.Fatalf("graph %d ratio %v: kept %d nodes, want at most %d", gid, ratio, out.N, want)
			case int(out.N) < want && leaves:
				t.Fatalf("graph %d ratio %v: kept %d of %d nodes though the component goes on", gid, ratio, out.N, want)
			}
			if out.N > 0 && testutil.Components(out.N, out.Edges) != 1 {
				t.Fatalf("graph %d ratio %v: the subgraph view is not connected", gid, ratio)
			}
		}
	}
	if _, err := aug.New("subgraph", map[string]string{"ratio": "0"}, nil); err == nil {
		t.Error("ratio=0 accepted")
	}
}

// TestAttrMaskProperties: ⌊ratio·N⌋ nodes are masked, each distinct
// (partial Fisher–Yates); a masked node's float block is zeros, its
// categorical columns the reserved codes (vocabulary sizes) and its
// one-hot mix the zero vector (code 0, weight 0); every other node keeps its own features; edges,
// edge features, label and targets are the input's.
func TestAttrMaskProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var s aug.Scratch
	var out aug.Graph
	for gid := range 200 {
		n := int32(1 + r.IntN(50))
		g := randomGraph(r, int64(gid), n, r.IntN(int(n)*2+1))
		dense := identified(gid, g.N, g.Edges, nil, nil)
		oneHot := g
		codes := make([]int32, n)
		for v := range codes {
			codes[v] = int32(v % 7)
		}
		oneHot.SetCodes(codes, 7)
		for _, ratio := range []float64{0, 0.2, 0.5, 1} {
			op := aug.AttrMask{Ratio: ratio}
			want := int(ratio * float64(n))
			if err := op.Apply(&dense, &out, s.Rand(3, 1, dense.ID, aug.OpAttrMask), &s); err != nil {
				t.Fatal(err)
			}
			if err := aug.Check(&out, 0); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out.Edges, dense.Edges) || !slices.Equal(out.EdgeCat, dense.EdgeCat) ||
				!slices.Equal(out.EdgeX, dense.EdgeX) || out.Label != dense.Label || len(out.Y) != len(dense.Y) {
				t.Fatalf("graph %d: attrmask changed structure, edge features, label or targets", gid)
			}
			masked := 0
			for v := range int(n) {
				x, c := out.X[3*v:3*v+3], out.NodeCat[2*v:2*v+2]
				switch {
				case slices.Equal(x, []float32{0, 0, 0}) && slices.Equal(c, dense.CatVocab):
					masked++
				case !slices.Equal(x, dense.X[3*v:3*v+3]) || !slices.Equal(c, dense.NodeCat[2*v:2*v+2]):
					t.Fatalf("graph %d ratio %v: node %d neither masked nor its own", gid, ratio, v)
				}
			}
			if masked != want {
				t.Fatalf("graph %d ratio %v: %d nodes masked, want %d", gid, ratio, masked, want)
			}
			if err := op.Apply(&oneHot, &out, s.Rand(3, 1, oneHot.ID, aug.OpAttrMask), &s); err != nil {
				t.Fatal(err)
			}
			if err := aug.Check(&out, 0); err != nil {
				t.Fatal(err)
			}
			empty := 0
			for v := range int(n) {
				lo, hi := out.FeatOff[v], out.FeatOff[v+1]
				switch {
				case hi == lo+1 && out.Codes[lo] == 0 && out.Weights[lo] == 0:
					empty++
				case hi-lo != 1 || out.Codes[lo] != codes[v] || out.Weights[lo] != 1:
					t.Fatalf("graph %d: unmasked node %d lost its one-hot code", gid, v)
				}
			}
			if empty != want {
				t.Fatalf("graph %d ratio %v: %d one-hot nodes masked, want %d", gid, ratio, empty, want)
			}
		}
	}
}

// TestDropRatioProperties: dropnode:ratio=R keeps N − min(N−1, ⌊R·N⌋)
// nodes and is the subgraph they induce, each kept node with its own
// features, ids in input order; dropedge:ratio=R keeps E − ⌊R·E⌋ of the
// input's edges, each with its own features, and every node. Without a
// ratio both are the one-element baselines.
func TestDropRatioProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	var s aug.Scratch
	var out aug.Graph
	for gid := range 200 {
		n := int32(1 + r.IntN(50))
		g := randomGraph(r, int64(gid), n, r.IntN(int(n)*2+1))
		in := identified(gid, g.N, g.Edges, nil, nil)
		for _, ratio := range []float64{0, 0.2, 0.5, 1} {
			params := map[string]string{"ratio": strconv.FormatFloat(ratio, 'g', -1, 64)}
			nodes, _ := aug.New("dropnode", params, nil)
			if err := nodes.Apply(&in, &out, s.Rand(3, 1, in.ID, aug.OpDropNode), &s); err != nil {
				t.Fatal(err)
			}
			if err := aug.Check(&out, 0); err != nil {
				t.Fatalf("graph %d ratio %v: %v", gid, ratio, err)
			}
			if want := int(n) - min(int(n)-1, int(ratio*float64(n))); int(out.N) != want {
				t.Fatalf("graph %d ratio %v: %d nodes kept, want %d", gid, ratio, out.N, want)
			}
			kept := make([]int32, out.N)
			isKept := make([]bool, n)
			for v := range out.N {
				kept[v] = int32(out.X[3*v]) - 1
				isKept[kept[v]] = true
				if v > 0 && kept[v] <= kept[v-1] {
					t.Fatalf("graph %d: ids not in input order", gid)
				}
			}
			var induced []int32
			for k := 0; k < len(in.Edges); k += 2 {
				if u, v := in.Edges[k], in.Edges[k+1]; isKept[u] && isKept[v] {
					induced = append(induced, int32(slices.Index(kept, u)), int32(slices.Index(kept, v)))
				}
			}
			if !slices.Equal(induced, out.Edges) {
				t.Fatalf("graph %d ratio %v: not the kept nodes' induced subgraph", gid, ratio)
			}
			edges, _ := aug.New("dropedge", params, nil)
			if err := edges.Apply(&in, &out, s.Rand(3, 1, in.ID, aug.OpDropEdge), &s); err != nil {
				t.Fatal(err)
			}
			if err := aug.Check(&out, 0); err != nil {
				t.Fatal(err)
			}
			e := len(in.Edges) / 2
			if out.N != in.N || len(out.Edges)/2 != e-int(ratio*float64(e)) || !slices.Equal(out.X, in.X) {
				t.Fatalf("graph %d ratio %v: %d nodes, %d of %d edges kept", gid, ratio, out.N, len(out.Edges)/2, e)
			}
			// Every kept edge is an input edge, with that edge's codes.
			for k := 0; k < len(out.Edges); k += 2 {
				i := pairIndex(in.Edges, out.Edges[k], out.Edges[k+1])
				if i < 0 || !slices.Equal(out.EdgeCat[k/2*int(in.EdgeCatCols):(k/2+1)*int(in.EdgeCatCols)],
					in.EdgeCat[i*int(in.EdgeCatCols):(i+1)*int(in.EdgeCatCols)]) {
					t.Fatalf("graph %d: kept edge (%d, %d) is not an input edge with its features", gid, out.Edges[k], out.Edges[k+1])
				}
			}
		}
	}
	for _, name := range []string{"dropnode", "dropedge"} {
		if op, _ := aug.New(name, nil, nil); op != (aug.DropNode{}) && op != (aug.DropEdge{}) {
			t.Errorf("%s without a ratio is %T, want the one-element baseline", name, op)
		}
		if _, err := aug.New(name, map[string]string{"ratio": "1.5"}, nil); err == nil {
			t.Errorf("%s ratio=1.5 accepted", name)
		}
	}
}

// pairIndex is the index of undirected edge (u, v) in a sorted pair list, or -1.
func pairIndex(edges []int32, u, v int32) int {
	for k := 0; k < len(edges); k += 2 {
		if edges[k] == u && edges[k+1] == v {
			return k / 2
		}
	}
	return -1
}
