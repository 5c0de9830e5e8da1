package aug_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

// Features under augmentation, checked from the outside. Every node of a
// test graph carries its identity in its float block, X = (v+1, (v+1)²,
// graph+1) — a merged node's mean of two still names both, by solving for
// them — and codes (its real label where there is one, and v mod 128);
// every edge carries its identity in its floats, (k+1, graph+1), and a
// code (its real label, or k mod 5). Then, whatever an op does inside:
//
//   - every output node's codes are those of an input node it stands for
//     (ChangeAttr: but one code, within its column's vocabulary);
//   - every output edge's features are those of the input edge it came
//     from — whose ends are nodes its own ends stand for (SubMix: G's edge
//     at the same positions, or, inside S, G′'s edge between the partner
//     nodes) — or the fill, and the fill only where no input edge between
//     the nodes its ends stand for exists;
//   - float targets are the input's, or SubMix's mix (missing stays
//     missing).
//
// So an edge's features never travel with another edge, a new edge never
// borrows an old one's (GraphCL's permute_edges), no feature is summed
// or averaged into a code (PyG's to_undirected), and none is dropped for
// an edge that kept its origin (GraphAug).

const fillCode = 1000 // the fill's codes, the vocabularies' reserved values

// identified returns g with identities as above; labels, when set, are
// the graph's real edge labels (one per edge) and codes its real node
// codes.
func identified(gid int, n int32, edges []int32, nodeCodes, edgeLabels []int32) aug.Graph {
	g := aug.Graph{ID: int64(gid), N: n, Edges: slices.Clone(edges), Dense: true, Dim: 3, Q: 1,
		CatCols: 2, CatVocab: []int32{fillCode, 128}, EdgeCatCols: 1, EdgeDim: 2,
		Fill: &aug.EdgeFill{Codes: []int32{fillCode}, X: -1}, Y: []float32{float32(gid), float32(math.NaN())}}
	if gid%3 == 0 {
		g.Y[1] = 0.5
	}
	for v := int32(0); v < n; v++ {
		id := float32(v + 1)
		g.X = append(g.X, id, id*id, float32(gid+1))
		c := int32(0)
		if nodeCodes != nil {
			c = nodeCodes[v]
		}
		g.NodeCat = append(g.NodeCat, c, v%128)
	}
	for k := 0; k < len(edges)/2; k++ {
		c := int32(k % 5)
		if edgeLabels != nil {
			c = edgeLabels[k]
		}
		g.EdgeCat = append(g.EdgeCat, c)
		g.EdgeX = append(g.EdgeX, float32(k+1), float32(gid+1))
	}
	return g
}

// origins decodes the input nodes an output node stands for: its graph,
// and one node, or the two a merge averaged.
func origins(x []float32) (gid int, vs []int32, err error) {
	s, q := float64(x[0])*2, float64(x[1])*2 // sums of ids and of squares over the two (or one twice)
	gid = int(x[2]) - 1
	if float64(x[2]) != math.Round(float64(x[2])) {
		return 0, nil, fmt.Errorf("graph identity %g averaged", x[2])
	}
	p := (s*s - q) / 2 // product of the two ids
	disc := s*s - 4*p
	if disc < 0 {
		return 0, nil, fmt.Errorf("identity (%g, %g) is no mean of two nodes", x[0], x[1])
	}
	r := math.Sqrt(disc)
	a, b := (s-r)/2, (s+r)/2
	if a != math.Round(a) || b != math.Round(b) || a < 1 {
		return 0, nil, fmt.Errorf("identity (%g, %g) is no mean of two nodes", x[0], x[1])
	}
	vs = append(vs, int32(a)-1)
	if b != a {
		vs = append(vs, int32(b)-1)
	}
	return gid, vs, nil
}

// checkFeatures checks out, an op's output for in (partners by graph id
// in byID), as the package comment says.
func checkFeatures(t *testing.T, name string, in, out *aug.Graph, byID map[int]*aug.Graph, changeAttr, submix bool) {
	t.Helper()
	if err := aug.Check(out, 0); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s, graph %d: %s", name, in.ID, fmt.Sprintf(format, args...))
	}
	from := make([][]int32, out.N)
	graphOf := make([]int, out.N)
	changed := 0
	for z := int32(0); z < out.N; z++ {
		gid, vs, err := origins(out.X[3*z : 3*z+3])
		if err != nil {
			fail("node %d: %v", z, err)
		}
		src := byID[gid]
		if src == nil || (gid != int(in.ID) && !submix) {
			fail("node %d stands for graph %d", z, gid)
		}
		from[z], graphOf[z] = vs, gid
		codes := out.NodeCat[2*z : 2*z+2]
		match := false
		for _, v := range vs {
			if v >= src.N {
				fail("node %d stands for node %d of %d", z, v, src.N)
			}
			if slices.Equal(codes, src.NodeCat[2*v:2*v+2]) {
				match = true
			}
		}
		if !match {
			if !changeAttr {
				fail("node %d has codes %v, none of the nodes %v it stands for", z, codes, vs)
			}
			changed++
		}
	}
	if changed > 1 {
		fail("changeattr changed %d nodes", changed)
	}
	for e := 0; e < out.NumEdges(); e++ {
		a, b := out.Edges[2*e], out.Edges[2*e+1]
		x, code := out.EdgeX[2*e:2*e+2], out.EdgeCat[e]
		if x[0] == -1 {
			if code != fillCode || x[1] != -1 {
				fail("edge (%d, %d): a half fill %v %d", a, b, x, code)
			}
			if submix {
				fail("edge (%d, %d): the fill in a mix (every edge comes from G or G′)", a, b)
			}
			for _, u := range from[a] {
				for _, v := range from[b] {
					if u != v && edgeOf(in, u, v) >= 0 {
						fail("edge (%d, %d) got the fill, but input edge (%d, %d) is where it came from", a, b, u, v)
					}
				}
			}
			continue
		}
		k, gid := int(x[0])-1, int(x[1])-1
		src := byID[gid]
		if src == nil || k < 0 || k >= src.NumEdges() {
			fail("edge (%d, %d): features of edge %d of graph %d, which does not exist", a, b, k, gid)
		}
		u, v := src.Edges[2*k], src.Edges[2*k+1]
		if code != src.EdgeCat[k] {
			fail("edge (%d, %d): code %d, its source edge's is %d", a, b, code, src.EdgeCat[k])
		}
		ok := false
		switch {
		case submix && gid == int(in.ID):
			ok = u == a && v == b // E1: G's edge, at its own positions
		case submix:
			ok = graphOf[a] == gid && graphOf[b] == gid && slices.Equal(from[a], []int32{u}) && slices.Equal(from[b], []int32{v}) ||
				slices.Equal(from[a], []int32{v}) && slices.Equal(from[b], []int32{u})
		default:
			ok = (slices.Contains(from[a], u) && slices.Contains(from[b], v)) || (slices.Contains(from[a], v) && slices.Contains(from[b], u))
		}
		if !ok {
			fail("edge (%d, %d) has the features of edge (%d, %d) of graph %d, which is not where it came from (its ends stand for %v and %v)",
				a, b, u, v, gid, from[a], from[b])
		}
	}
	if len(out.Y) != len(in.Y) {
		fail("%d targets, want %d", len(out.Y), len(in.Y))
	}
	want := in.Y
	if submix && out.Q < 1 {
		// The partner is the graph S's nodes stand for.
		partner := -1
		for z := range graphOf {
			if graphOf[z] != int(in.ID) {
				partner = graphOf[z]
			}
		}
		if partner < 0 {
			fail("a mix (q = %g) without a partner node", out.Q)
		}
		want = nil
		for i, a := range in.Y {
			b, q := byID[partner].Y[i], out.Q
			switch {
			case q == 0:
				want = append(want, b)
			case a != a || b != b:
				want = append(want, float32(math.NaN()))
			default:
				want = append(want, q*a+(1-q)*b)
			}
		}
	}
	for i, y := range out.Y {
		if y != want[i] && !(y != y && want[i] != want[i]) {
			fail("target %d is %g, want %g (input %v, q %g)", i, y, want[i], in.Y, out.Q)
		}
	}
}

// edgeOf is the index of edge {u, v} in g, or −1.
func edgeOf(g *aug.Graph, u, v int32) int {
	a, b := min(u, v), max(u, v)
	for k := 0; k < len(g.Edges); k += 2 {
		if g.Edges[k] == a && g.Edges[k+1] == b {
			return k / 2
		}
	}
	return -1
}

type poolPartners struct{ graphs []aug.Graph }

func (p poolPartners) Partner(_ context.Context, target int64, r aug.Rand, into *aug.Graph) error {
	i := r.IntN(len(p.graphs) - 1)
	if int64(i) >= target {
		i++
	}
	into.CopyFrom(&p.graphs[i])
	return nil
}

// featureOps is every op of the table, SubMix with partners from pool.
func featureOps(pool []aug.Graph) []aug.Op {
	var ops []aug.Op
	for _, s := range aug.Specs() {
		op, err := aug.New(s.Name, nil, poolPartners{pool})
		if err != nil {
			panic(err)
		}
		ops = append(ops, op)
	}
	return ops
}

func runFeatureProperty(t *testing.T, pool []aug.Graph, draws int) {
	byID := map[int]*aug.Graph{}
	for i := range pool {
		byID[int(pool[i].ID)] = &pool[i]
	}
	var s aug.Scratch
	var out aug.Graph
	for _, op := range featureOps(pool) {
		name := op.Spec().Name
		if name == "attrmask" {
			continue // masks what names a node: TestAttrMaskProperties traces it
		}
		for i := range pool {
			in := &pool[i]
			for d := range draws {
				r := s.Rand(uint64(d), 7, in.ID, aug.OpID(op))
				if err := op.Apply(in, &out, r, &s); err != nil {
					t.Fatalf("%s, graph %d: %v", name, in.ID, err)
				}
				checkFeatures(t, name, in, &out, byID, name == "changeattr", name == "submix" || name == "submix-base")
			}
		}
	}
}

func TestFeaturesFollowRandomGraphs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var pool []aug.Graph
	for gid := range 40 {
		n := int32(1 + r.IntN(30))
		g := randomGraph(r, int64(gid), n, r.IntN(int(n)*int(n)/2+1))
		pool = append(pool, identified(gid, g.N, g.Edges, nil, nil))
	}
	runFeatureProperty(t, pool, 20)
}

// The same on the real MUTAG and PTC_MR: their graphs, their node labels
// as codes and their bond labels as the edges' code (checked to follow
// the edge as its identity does).
func TestFeaturesFollowMoleculesReal(t *testing.T) {
	for _, name := range []string{"MUTAG", "PTC_MR"} {
		t.Run(name, func(t *testing.T) {
			in := testutil.Shared(t, "tu", name)
			out := filepath.Join(t.TempDir(), "s")
			if _, err := convert.Run(context.Background(), convert.Options{Input: in, Out: out}); err != nil {
				t.Fatal(err)
			}
			rd, err := shard.Open(context.Background(), out)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			if !rd.Manifest().HasEdgeLabels {
				t.Fatalf("%s has no edge labels", name)
			}
			var pool []aug.Graph
			for id := range rd.NumGraphs() {
				sg, _ := rd.Graph(int64(id))
				pool = append(pool, identified(id, sg.NumNodes, sg.Edges, sg.Codes, sg.EdgeLabels))
			}
			draws := 3
			if testing.Short() {
				draws = 1
			}
			runFeatureProperty(t, pool, draws)
		})
	}
}
