package aug_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/augloader/augloader/aug"
)

// script is a Rand whose draws the test writes down, so each expected output
// below can be derived by hand from the algorithm.
type script struct {
	t      *testing.T
	ints   []int
	floats []float64
	bits   []uint64
}

func (s *script) IntN(n int) int {
	s.t.Helper()
	if len(s.ints) == 0 {
		s.t.Fatalf("unscripted IntN(%d)", n)
	}
	v := s.ints[0]
	s.ints = s.ints[1:]
	if v < 0 || v >= n {
		s.t.Fatalf("scripted IntN(%d) = %d out of range", n, v)
	}
	return v
}

func (s *script) Int64N(n int64) int64 { return int64(s.IntN(int(n))) }

func (s *script) Float64() float64 {
	s.t.Helper()
	if len(s.floats) == 0 {
		s.t.Fatal("unscripted Float64")
	}
	v := s.floats[0]
	s.floats = s.floats[1:]
	return v
}

func (s *script) Uint64() uint64 {
	s.t.Helper()
	if len(s.bits) == 0 {
		s.t.Fatal("unscripted Uint64")
	}
	v := s.bits[0]
	s.bits = s.bits[1:]
	return v
}

func (s *script) done() {
	s.t.Helper()
	if len(s.ints)+len(s.floats)+len(s.bits) > 0 {
		s.t.Fatalf("draws left over: ints %v floats %v bits %v", s.ints, s.floats, s.bits)
	}
}

// graph builds a test graph whose node v has feature code v (dim 8), so
// the output features show where each node came from.
func graph(n int32, edges ...int32) *aug.Graph {
	g := &aug.Graph{ID: 1, N: n, Edges: edges, Q: 1}
	codes := make([]int32, n)
	for i := range codes {
		codes[i] = int32(i)
	}
	g.SetCodes(codes, 8)
	return g
}

type feat struct {
	off   []int32
	codes []int32
	w     []float32
}

// one is the feature layout where node v has the codes given, weight 1.
func one(codes ...int32) feat {
	f := feat{codes: codes}
	for i := range codes {
		f.off = append(f.off, int32(i))
		f.w = append(f.w, 1)
	}
	f.off = append(f.off, int32(len(codes)))
	return f
}

func TestHandCases(t *testing.T) {
	cases := []struct {
		name  string
		op    aug.Op
		in    *aug.Graph
		draws script
		n     int32
		edges []int32
		feat  feat
	}{
		{
			// Triangle, split v_i = 1; neighbour 0 -> v_j (= 1), 2 -> v_k (= 3).
			// t=1, d=2, |T|=2, c = 3 - 3/2 - 2 = -0.5,
			// h = (sqrt(0.25 + 12 - 6) + 0.5)/2 = 1.5, prob = 0.75:
			// u=0 draws 0.5 (added: 0 is on v_j, so edge (0,3)), u=2 draws 0.9.
			// G'' = (0,1) (0,2) (2,3) (1,3) (0,3); merge edge #2 = (2,3) into 2:
			// (2,3) drops, (1,3)->(1,2), (0,3)->(0,2) duplicate drops.
			name: "triangle nodesam", op: aug.NodeSam{}, in: graph(3, 0, 1, 0, 2, 1, 2),
			draws: script{ints: []int{1, 2}, bits: []uint64{0, 1}, floats: []float64{0.5, 0.9}},
			n:     3, edges: []int32{0, 1, 0, 2, 1, 2},
			feat: feat{off: []int32{0, 1, 2, 4}, codes: []int32{0, 1, 2, 1}, w: []float32{1, 1, 0.5, 0.5}},
		},
		{
			// Path 0-1-2, split 1, both neighbours -> v_k = 3; no triangle, no
			// adjustment. G'' = (0,3) (2,3) (1,3): a star on 3. Merge edge #0
			// (0,3) into 0: node 0 = mean of codes 0 and 1 (v_k copies 1).
			name: "path nodesam", op: aug.NodeSam{}, in: graph(3, 0, 1, 1, 2),
			draws: script{ints: []int{1, 0}, bits: []uint64{1, 1}},
			n:     3, edges: []int32{0, 1, 0, 2},
			feat: feat{off: []int32{0, 2, 3, 4}, codes: []int32{0, 1, 1, 2}, w: []float32{0.5, 0.5, 1, 1}},
		},
		{
			// Star on 0 with leaves 1,2,3; split 0: 1 -> v_j, 2 -> v_k (= 4),
			// 3 -> v_j. G'' = (0,1) (2,4) (0,3) (0,4). Merge edge #1 (2,4) into
			// 2, which keeps edge (0,2) from (0,4): the star again, node 2 =
			// mean of codes 2 and 0.
			name: "star nodesam", op: aug.NodeSam{}, in: graph(4, 0, 1, 0, 2, 0, 3),
			draws: script{ints: []int{0, 1}, bits: []uint64{0, 1, 0}},
			n:     4, edges: []int32{0, 1, 0, 2, 0, 3},
			feat: feat{off: []int32{0, 1, 2, 4, 5}, codes: []int32{0, 1, 2, 0, 3}, w: []float32{1, 1, 0.5, 0.5, 1}},
		},
		{
			// 4-clique, split 0: 1 -> v_j (= 0), 2, 3 -> v_k (= 4). t=3, d=3,
			// |T|=3, c = 6 - 3 - 2 = 1, h = (sqrt(1 + 48 - 18) - 1)/2 = 2.2839,
			// prob = 0.7613: u=1 (0.1, added: (1,4)), u=2 (0.8, no), u=3 (0.7,
			// added: (0,3)). G'' = (0,1) (2,4) (3,4) (1,2) (1,3) (2,3) (0,4)
			// (1,4) (0,3). Merge edge #4 (1,3) into 1; node 4 moves to id 3.
			// Kept: (0,1) (2,3) (1,3) (1,2) (0,3); duplicates of (1,2) (1,3)
			// (0,1) drop. Node 3 now carries v_k's copy of code 0.
			name: "4-clique nodesam", op: aug.NodeSam{}, in: graph(4, 0, 1, 0, 2, 0, 3, 1, 2, 1, 3, 2, 3),
			draws: script{ints: []int{0, 4}, bits: []uint64{0, 1, 1}, floats: []float64{0.1, 0.8, 0.7}},
			n:     4, edges: []int32{0, 1, 0, 3, 1, 2, 1, 3, 2, 3},
			feat: feat{off: []int32{0, 1, 3, 4, 5}, codes: []int32{0, 1, 3, 2, 0}, w: []float32{1, 0.5, 0.5, 1, 1}},
		},
		{
			// Edge (0,1) plus isolated node 2; split the isolated node (no
			// neighbours, d = 0: no coins, no adjustment); G'' = (0,1) (2,3);
			// merge edge #0 (0,1) into 0, node 3 moves to id 1. Node 0 ends
			// isolated: still two components. (The authors' code drops
			// isolated nodes from its edge-list bookkeeping.)
			name: "isolated node nodesam", op: aug.NodeSam{}, in: graph(3, 0, 1),
			draws: script{ints: []int{2, 0}},
			n:     3, edges: []int32{1, 2},
			feat: feat{off: []int32{0, 2, 3, 4}, codes: []int32{0, 1, 2, 2}, w: []float32{0.5, 0.5, 1, 1}},
		},
		{
			// One node: split into (0,1), merge the only edge: the input.
			name: "single node nodesam", op: aug.NodeSam{}, in: graph(1),
			draws: script{ints: []int{0, 0}},
			n:     1, edges: []int32{},
			feat: one(0),
		},
		{
			// Triangle {0,1,2} + edge (3,4). Split 3: neighbour 4 -> v_k = 5.
			// G'' = (0,1) (0,2) (1,2) (4,5) (3,5); merge edge #1 (0,2) into 0,
			// node 5 moves to id 2: (0,1) (2,4) (2,3). Two components.
			name: "two components nodesam", op: aug.NodeSam{}, in: graph(5, 0, 1, 0, 2, 1, 2, 3, 4),
			draws: script{ints: []int{3, 1}, bits: []uint64{1}},
			n:     5, edges: []int32{0, 1, 2, 3, 2, 4},
			feat: feat{off: []int32{0, 2, 3, 4, 5, 6}, codes: []int32{0, 2, 1, 3, 3, 4}, w: []float32{0.5, 0.5, 1, 1, 1, 1}},
		},
		{
			// NodeSamBase on the triangle with the draws of the first case minus
			// the adjustment: G'' = (0,1) (0,2) (2,3) (1,3), a 4-cycle; merge
			// #2 (2,3) into 2: (0,1) (0,2) (1,2). No float draws.
			name: "triangle nodesam-base", op: aug.NodeSamBase{}, in: graph(3, 0, 1, 0, 2, 1, 2),
			draws: script{ints: []int{1, 2}, bits: []uint64{0, 1}},
			n:     3, edges: []int32{0, 1, 0, 2, 1, 2},
			feat: feat{off: []int32{0, 1, 2, 4}, codes: []int32{0, 1, 2, 1}, w: []float32{1, 1, 0.5, 0.5}},
		},
		{
			// SplitOnly on the path, split 1 with 0 -> v_j, 2 -> v_k: 4 nodes,
			// (0,1) (2,3) (1,3): a path 0-1-3-2.
			name: "path split-only", op: aug.SplitOnly{}, in: graph(3, 0, 1, 1, 2),
			draws: script{ints: []int{1}, bits: []uint64{0, 1}},
			n:     4, edges: []int32{0, 1, 1, 3, 2, 3},
			feat: one(0, 1, 2, 1),
		},
		{
			// MergeOnly on the star, merge edge #0 (0,1): node 3 moves to id 1.
			name: "star merge-only", op: aug.MergeOnly{}, in: graph(4, 0, 1, 0, 2, 0, 3),
			draws: script{ints: []int{0}},
			n:     3, edges: []int32{0, 1, 0, 2},
			feat: feat{off: []int32{0, 2, 3, 4}, codes: []int32{0, 1, 3, 2}, w: []float32{0.5, 0.5, 1, 1}},
		},
		{
			name: "path dropedge", op: aug.DropEdge{}, in: graph(3, 0, 1, 1, 2),
			draws: script{ints: []int{1}},
			n:     3, edges: []int32{0, 1}, feat: one(0, 1, 2),
		},
		{
			// Drop node 0 of the triangle: node 2 takes id 0.
			name: "triangle dropnode", op: aug.DropNode{}, in: graph(3, 0, 1, 0, 2, 1, 2),
			draws: script{ints: []int{0}},
			n:     2, edges: []int32{0, 1}, feat: one(2, 1),
		},
		{
			// Path 0-1-2-3 is sparse (3 of 6 pairs): rejection draws (1,1) then
			// (2,0), which is not an edge.
			name: "path addedge", op: aug.AddEdge{}, in: graph(4, 0, 1, 1, 2, 2, 3),
			draws: script{ints: []int{1, 1, 2, 0}},
			n:     4, edges: []int32{0, 1, 0, 2, 1, 2, 2, 3}, feat: one(0, 1, 2, 3),
		},
		{
			// The 4-cycle 0-1-3-2 has 4 of 6 pairs (2m > pairs): the dense path
			// enumerates the non-edges in (u,v) order, (0,3) then (1,2), and
			// picks #1 = (1,2).
			name: "dense addedge", op: aug.AddEdge{}, in: graph(4, 0, 1, 0, 2, 1, 3, 2, 3),
			draws: script{ints: []int{1}},
			n:     4, edges: []int32{0, 1, 0, 2, 1, 2, 1, 3, 2, 3}, feat: one(0, 1, 2, 3),
		},
		{
			name: "path changeattr", op: aug.ChangeAttr{}, in: graph(3, 0, 1, 1, 2),
			draws: script{ints: []int{2, 7}},
			n:     3, edges: []int32{0, 1, 1, 2}, feat: one(0, 1, 7),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s aug.Scratch
			var out aug.Graph
			c.draws.t = t
			if err := c.op.Apply(c.in, &out, &c.draws, &s); err != nil {
				t.Fatal(err)
			}
			c.draws.done()
			if err := aug.Check(&out, 0); err != nil {
				t.Fatal(err)
			}
			if out.N != c.n || !slices.Equal(out.Edges, c.edges) {
				t.Errorf("got %d nodes, edges %v\nwant %d nodes, edges %v", out.N, out.Edges, c.n, c.edges)
			}
			if !slices.Equal(out.FeatOff, c.feat.off) || !slices.Equal(out.Codes, c.feat.codes) || !slices.Equal(out.Weights, c.feat.w) {
				t.Errorf("features off %v codes %v w %v\nwant off %v codes %v w %v", out.FeatOff, out.Codes, out.Weights, c.feat.off, c.feat.codes, c.feat.w)
			}
		})
	}
}

// fixed is a Partners that always returns one graph.
type fixed struct{ g *aug.Graph }

func (f fixed) Partner(_ context.Context, _ int64, _ aug.Rand, into *aug.Graph) error {
	into.CopyFrom(f.g)
	return nil
}

func TestHandSubMix(t *testing.T) {
	// Target: path 0-1-2-3, class 0, codes 10..13. Partner: triangle, class
	// 1, codes 20..22. Roots 0 and 0; U = 0.5, p = 0.9: k = ceil(0.45·min(4,
	// 3)) = ceil(1.35) = 2. S = [0, 1] (root, then its only neighbour, the
	// best PPR score); S' = [0, 1] (nodes 1 and 2 tie exactly by symmetry;
	// the smaller id wins). E1 = (1,2) (2,3); E2 = (0,1) mapped to (0,1).
	// q = 2/3; features of 0, 1 become 20, 21.
	target := &aug.Graph{ID: 0, N: 4, Edges: []int32{0, 1, 1, 2, 2, 3}, Label: 0, Q: 1}
	target.SetCodes([]int32{10, 11, 12, 13}, 32)
	partner := &aug.Graph{ID: 5, N: 3, Edges: []int32{0, 1, 0, 2, 1, 2}, Label: 1, Q: 1}
	partner.SetCodes([]int32{20, 21, 22}, 32)
	r := &script{t: t, ints: []int{0, 0}, floats: []float64{0.5}}
	var s aug.Scratch
	var out aug.Graph
	if err := (aug.SubMix{P: 0.9, Partners: fixed{partner}}).Apply(target, &out, r, &s); err != nil {
		t.Fatal(err)
	}
	r.done()
	if err := aug.Check(&out, 2); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Edges, []int32{0, 1, 1, 2, 2, 3}) || !slices.Equal(out.Codes, []int32{20, 21, 12, 13}) {
		t.Errorf("edges %v codes %v", out.Edges, out.Codes)
	}
	if out.Label != 0 || out.MixLabel != 1 || math.Abs(float64(out.Q)-2.0/3) > 1e-7 {
		t.Errorf("label %d mix %d q %g, want 0, 1, 2/3", out.Label, out.MixLabel, out.Q)
	}
	y := make([]float32, 2)
	out.SoftLabel(y)
	if math.Abs(float64(y[0]+y[1])-1) > 1e-6 {
		t.Errorf("soft label %v does not sum to 1", y)
	}
}
