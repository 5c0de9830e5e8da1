// Package aug implements graph augmentations for graph classification:
// NodeSam and SubMix (Park et al., "Model-Agnostic Augmentation for
// Accurate Graph Classification", WWW'22), their ablations, GraphCL's
// four (dropnode, subgraph, attrmask, and dropedge with addedge and
// changeattr as baselines). It works on an in-memory Graph and knows
// nothing of shards.
//
// Contract:
//
//   - Every op is exact to the paper as pinned down in the project brief
//     and runs in time linear in nodes plus edges (SubMix adds a sort of
//     the root's component).
//   - Every random draw comes from the *rand.Rand the caller passes,
//     keyed by (seed, epoch, graph or position, stream) (Scratch.Rand).
//     The stream is the op's id, or one of the Stream* constants for a
//     draw outside any op; the ids are pinned (TestStreamIDsPinned) and a
//     twin t draws from stream + t·TwinStride, so the same tuple gives the
//     same output bytes on any goroutine and twins never share a draw.
//   - Bound gives the largest graph an op can make of an input of a given
//     size and Work what applying it allocates, so a caller can budget a
//     batch before building it. SubMix's partner comes from the caller's
//     Partners, and its PageRank rankings may be kept in a PPRCache.
//   - Outputs satisfy Check: edges once per undirected pair as (u, v),
//     u < v, sorted, no self-loops, ids in range; features of the right
//     shape; categorical features are sparse mixes of codes (a merge
//     averages one-hots) whose weights sum to 1, or the one pair (0, 0)
//     for a node attrmask masked; categorical columns hold codes of their
//     vocabulary, or its size (the reserved code) where masked.
//   - Apply never modifies its input; it writes into out, reusing out's
//     buffers, and into a *Scratch that may be reused across calls (not
//     concurrently). With reused out and scratch, NodeSam allocates nothing
//     in steady state.
//   - Coalesced.Append expands an output's canonical pairs into PyG's
//     coalesced edge_index layout; NodeSam and its ablations also write
//     that layout directly (CoalescedApplier), byte for byte the same.
//
// Usage:
//
//	var s aug.Scratch
//	var out aug.Graph
//	r := s.Rand(seed, epoch, graphID, aug.OpNodeSam)
//	err := aug.NodeSam{}.Apply(&in, &out, r, &s)
package aug

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Graph is an undirected simple graph with node features and a label.
type Graph struct {
	ID int64 // graph id in the dataset (SubMix's partner source excludes it)
	N  int32 // nodes 0..N-1
	// Edges holds each undirected edge once as a pair (u, v), u < v; pairs
	// sorted by (u, v).
	Edges []int32
	// EdgeBuf is memory of the graph's own that a loader copies Edges into
	// when the input's memory is not kept for it (a cache limit); Edges
	// otherwise aliases the input.
	EdgeBuf []int32

	// Categorical features (Dim codes): node v's feature is the mix
	// Σ Weights[i]·onehot(Codes[i]) for i in FeatOff[v]:FeatOff[v+1].
	// An input graph has one code of weight 1 per node.
	FeatOff []int32
	Codes   []int32
	Weights []float32
	// Dense features: X holds N×Dim float32, node-major. Exactly one of the
	// two encodings is used; Dense says which.
	X     []float32
	Dense bool
	Dim   int32

	// Label is the class. A mixed graph (SubMix) has the soft label
	// Q·onehot(Label) + (1−Q)·onehot(MixLabel), 0 ≤ Q ≤ 1; Q = 1 means a
	// hard label.
	Label    int32
	MixLabel int32
	Q        float32

	// Index, when set, is BuildIndex of this graph: NodeSam then skips the
	// passes it would make to find neighbours and triangles. Outputs of an
	// op never carry one.
	Index *Index

	// Categorical node columns (shard format 3): CatCols codes per node,
	// node-major, column c's codes in 0..CatVocab[c]-1. Never mixed: an op
	// merging two nodes keeps one's codes (docs/schedule.md, "Features
	// under augmentation"). They sit beside X when the dataset also has a
	// float block (Dense); the one-hot mixes above are then unused.
	NodeCat  []int32
	CatCols  int32
	CatVocab []int32 // shared, read only

	// Edge features, aligned with Edges' pairs: EdgeCatCols codes and
	// EdgeDim floats per edge. An edge keeps its own wherever it goes; an
	// edge no input edge explains gets the Fill (codes: the reserved
	// vocabulary size of each column, or the code a user set).
	EdgeCat     []int32
	EdgeCatCols int32
	EdgeX       []float32
	EdgeDim     int32
	Fill        *EdgeFill // shared, read only; required with edge features

	// Y holds a graph's float targets (shard format 3's binary and
	// regression tasks), NaN where missing; a SubMix output's are already
	// mixed (a target missing on either side stays missing). A class task
	// uses Label, MixLabel and Q and leaves Y empty.
	Y []float32
}

// EdgeFill is what an edge no input edge explains carries: a code per
// categorical column and a value for every float.
type EdgeFill struct {
	Codes []int32
	X     float32
}

// String is the fill as --edge-fill takes it: "codes=C1,C2,…;x=V".
func (f EdgeFill) String() string {
	parts := make([]string, len(f.Codes))
	for i, c := range f.Codes {
		parts[i] = strconv.Itoa(int(c))
	}
	return "codes=" + strings.Join(parts, ",") + ";x=" + strconv.FormatFloat(float64(f.X), 'g', -1, 32)
}

// ParseEdgeFill reads "codes=C1,C2,…;x=V", either part alone ("x=0.5",
// "codes=0,0,0"); a part left out keeps def's.
func ParseEdgeFill(s string, def EdgeFill) (EdgeFill, error) {
	f := EdgeFill{Codes: def.Codes, X: def.X}
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
			return f, fmt.Errorf("edge fill %q: %q is not codes=… or x=…", s, part)
		case k == "codes":
			f.Codes = nil
			for _, c := range strings.Split(v, ",") {
				n, err := strconv.ParseInt(strings.TrimSpace(c), 10, 32)
				if err != nil {
					return f, fmt.Errorf("edge fill %q: code %q is not an integer", s, c)
				}
				f.Codes = append(f.Codes, int32(n))
			}
		case k == "x":
			x, err := strconv.ParseFloat(strings.TrimSpace(v), 32)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return f, fmt.Errorf("edge fill %q: x %q is not a finite number", s, v)
			}
			f.X = float32(x)
		default:
			return f, fmt.Errorf("edge fill %q: unknown part %q (codes or x)", s, k)
		}
	}
	return f, nil
}

// HasEdgeFeatures reports whether edges carry features.
func (g *Graph) HasEdgeFeatures() bool { return g.EdgeCatCols > 0 || g.EdgeDim > 0 }

// oneHot reports whether node features are formats 1 and 2's categorical
// one-hot mixes (FeatOff, Codes, Weights).
func (g *Graph) oneHot() bool { return !g.Dense && g.Dim > 0 }

// sameFeatures reports whether a and b carry features of one layout (a
// SubMix partner must).
func sameFeatures(a, b *Graph) bool {
	return a.Dense == b.Dense && a.Dim == b.Dim && a.CatCols == b.CatCols &&
		a.EdgeCatCols == b.EdgeCatCols && a.EdgeDim == b.EdgeDim && len(a.Y) == len(b.Y)
}

// copyLayout gives out in's feature layout (sizes, vocabularies, fill),
// leaving the values to the op.
func (out *Graph) copyLayout(in *Graph) {
	out.Dense, out.Dim = in.Dense, in.Dim
	out.CatCols, out.CatVocab = in.CatCols, in.CatVocab
	out.EdgeCatCols, out.EdgeDim, out.Fill = in.EdgeCatCols, in.EdgeDim, in.Fill
}

// NumEdges is the number of undirected edges.
func (g *Graph) NumEdges() int { return len(g.Edges) / 2 }

// SetCodes fills the categorical features from one code per node (weight 1),
// reusing g's buffers.
func (g *Graph) SetCodes(codes []int32, dim int32) {
	g.Dense, g.Dim, g.X = false, dim, g.X[:0]
	g.FeatOff = grow(g.FeatOff, int(g.N)+1)
	for i := range g.FeatOff {
		g.FeatOff[i] = int32(i)
	}
	g.Codes = append(g.Codes[:0], codes...)
	g.Weights = grow(g.Weights, len(codes))
	for i := range g.Weights {
		g.Weights[i] = 1
	}
}

// SetDense fills dense features (N×dim values), reusing g's buffers.
func (g *Graph) SetDense(x []float32, dim int32) {
	g.Dense, g.Dim = true, dim
	g.FeatOff, g.Codes, g.Weights = g.FeatOff[:0], g.Codes[:0], g.Weights[:0]
	g.X = append(g.X[:0], x...)
}

// ForgetInput drops an input graph's views of memory not its own, Edges
// (the input's, or EdgeBuf's, which it keeps) and Index, before the graph
// is kept idle between requests; the next load sets them again.
func (g *Graph) ForgetInput() { g.Edges, g.Index = nil, nil }

// CopyFrom makes g a deep copy of src, reusing g's buffers.
func (g *Graph) CopyFrom(src *Graph) {
	g.Index = nil
	g.ID, g.N = src.ID, src.N
	g.copyLayout(src)
	g.Label, g.MixLabel, g.Q = src.Label, src.MixLabel, src.Q
	g.Edges = append(g.Edges[:0], src.Edges...)
	g.FeatOff = append(g.FeatOff[:0], src.FeatOff...)
	g.Codes = append(g.Codes[:0], src.Codes...)
	g.Weights = append(g.Weights[:0], src.Weights...)
	g.X = append(g.X[:0], src.X...)
	g.NodeCat = append(g.NodeCat[:0], src.NodeCat...)
	g.EdgeCat = append(g.EdgeCat[:0], src.EdgeCat...)
	g.EdgeX = append(g.EdgeX[:0], src.EdgeX...)
	g.Y = append(g.Y[:0], src.Y...)
}

// appendMix appends node z's feature mix of src to g's codes and weights.
func (g *Graph) appendMix(src *Graph, z int32) {
	lo, hi := src.FeatOff[z], src.FeatOff[z+1]
	g.Codes = append(g.Codes, src.Codes[lo:hi]...)
	g.Weights = append(g.Weights, src.Weights[lo:hi]...)
}

// SoftLabel writes the label distribution over classes into y (len ≥ C).
func (g *Graph) SoftLabel(y []float32) {
	clear(y)
	y[g.Label] += g.Q
	if g.Q < 1 {
		y[g.MixLabel] += 1 - g.Q
	}
}

// AppendBinary appends a canonical byte encoding of g (every field, little
// endian) — what determinism tests compare.
func (g *Graph) AppendBinary(b []byte) []byte {
	le := binary.LittleEndian
	b = le.AppendUint64(b, uint64(g.ID))
	b = le.AppendUint32(b, uint32(g.N))
	b = le.AppendUint32(b, uint32(g.Label))
	b = le.AppendUint32(b, uint32(g.MixLabel))
	b = le.AppendUint32(b, math.Float32bits(g.Q))
	b = le.AppendUint32(b, uint32(g.Dim))
	for _, s := range [][]int32{g.Edges, g.FeatOff, g.Codes} {
		b = le.AppendUint32(b, uint32(len(s)))
		for _, v := range s {
			b = le.AppendUint32(b, uint32(v))
		}
	}
	for _, s := range [][]float32{g.Weights, g.X} {
		b = le.AppendUint32(b, uint32(len(s)))
		for _, v := range s {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	}
	if g.CatCols == 0 && !g.HasEdgeFeatures() && len(g.Y) == 0 {
		return b // formats 1 and 2's encoding, which the golden hashes pin
	}
	for _, s := range [][]int32{g.NodeCat, g.EdgeCat} {
		b = le.AppendUint32(b, uint32(len(s)))
		for _, v := range s {
			b = le.AppendUint32(b, uint32(v))
		}
	}
	for _, s := range [][]float32{g.EdgeX, g.Y} {
		b = le.AppendUint32(b, uint32(len(s)))
		for _, v := range s {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

// ErrInvalid is the category of every Check failure.
var ErrInvalid = errors.New("aug: invalid graph")

// Check is the invariant checker every test uses: edges (u, v) with
// 0 ≤ u < v < N, sorted, no duplicates, no self-loops; features of the
// right shape with codes in range and each node's weights positive and
// summing to 1; label and mix weight in range (classes ≤ 0 skips the label
// range check).
func Check(g *Graph, classes int32) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: graph %d: %s", ErrInvalid, g.ID, fmt.Sprintf(format, args...))
	}
	if g.N < 0 || len(g.Edges)%2 != 0 {
		return bad("%d nodes, %d edge ids", g.N, len(g.Edges))
	}
	for i := 0; i < len(g.Edges); i += 2 {
		u, v := g.Edges[i], g.Edges[i+1]
		if u < 0 || v >= g.N || u >= v {
			return bad("edge %d (%d, %d) is not 0 <= u < v < %d", i/2, u, v, g.N)
		}
		if i > 0 {
			pu, pv := g.Edges[i-2], g.Edges[i-1]
			if pu > u || (pu == u && pv >= v) {
				return bad("edge %d (%d, %d) not after (%d, %d): unsorted or duplicate", i/2, u, v, pu, pv)
			}
		}
	}
	if g.Dim < 0 || (g.Dense && g.Dim < 1) || (g.Dim == 0 && g.CatCols == 0 && len(g.FeatOff) > 0) {
		return bad("feature dim %d", g.Dim)
	}
	if err := checkColumns(g); err != nil {
		return bad("%v", err)
	}
	switch {
	case g.Dim == 0:
		// Format 3 without a float block: codes (checked above) or nothing.
	case g.Dense:
		if len(g.X) != int(g.N)*int(g.Dim) {
			return bad("%d dense values for %d nodes × dim %d", len(g.X), g.N, g.Dim)
		}
	default:
		if len(g.FeatOff) != int(g.N)+1 || g.FeatOff[0] != 0 || int(g.FeatOff[g.N]) != len(g.Codes) || len(g.Codes) != len(g.Weights) {
			return bad("feature offsets do not fit %d nodes and %d codes", g.N, len(g.Codes))
		}
		for v := int32(0); v < g.N; v++ {
			lo, hi := g.FeatOff[v], g.FeatOff[v+1]
			if hi <= lo {
				return bad("node %d has no feature", v)
			}
			if hi == lo+1 && g.Codes[lo] == 0 && g.Weights[lo] == 0 {
				continue // masked (attrmask): the zero vector
			}
			var sum float64
			for i := lo; i < hi; i++ {
				if g.Codes[i] < 0 || g.Codes[i] >= g.Dim || !(g.Weights[i] > 0) {
					return bad("node %d: code %d weight %g", v, g.Codes[i], g.Weights[i])
				}
				sum += float64(g.Weights[i])
			}
			if math.Abs(sum-1) > 1e-5 {
				return bad("node %d: feature weights sum to %g", v, sum)
			}
		}
	}
	if !(g.Q >= 0 && g.Q <= 1) {
		return bad("label weight q = %g", g.Q)
	}
	if classes > 0 && (g.Label < 0 || g.Label >= classes || g.MixLabel < 0 || g.MixLabel >= classes) {
		return bad("labels %d/%d out of range 0..%d", g.Label, g.MixLabel, classes-1)
	}
	return nil
}

// checkColumns checks the format 3 columns: lengths against nodes and
// edges, node codes within their vocabularies, edge codes within theirs or
// the fill.
func checkColumns(g *Graph) error {
	n, m := int(g.N), g.NumEdges()
	if g.CatCols < 0 || g.EdgeCatCols < 0 || g.EdgeDim < 0 {
		return fmt.Errorf("columns %d, %d, %d", g.CatCols, g.EdgeCatCols, g.EdgeDim)
	}
	if len(g.NodeCat) != n*int(g.CatCols) || len(g.CatVocab) != int(g.CatCols) {
		return fmt.Errorf("%d node codes (%d vocabularies) for %d nodes × %d columns", len(g.NodeCat), len(g.CatVocab), n, g.CatCols)
	}
	for i, c := range g.NodeCat {
		// A column's vocabulary size is its reserved code (attrmask's mask).
		if c < 0 || c > g.CatVocab[i%int(g.CatCols)] {
			return fmt.Errorf("node %d: code %d of column %d (vocabulary %d)", i/int(g.CatCols), c, i%int(g.CatCols), g.CatVocab[i%int(g.CatCols)])
		}
	}
	if len(g.EdgeCat) != m*int(g.EdgeCatCols) || len(g.EdgeX) != m*int(g.EdgeDim) {
		return fmt.Errorf("%d edge codes and %d edge values for %d edges × (%d, %d)", len(g.EdgeCat), len(g.EdgeX), m, g.EdgeCatCols, g.EdgeDim)
	}
	if g.HasEdgeFeatures() && (g.Fill == nil || len(g.Fill.Codes) != int(g.EdgeCatCols)) {
		return errors.New("edge features without a fill")
	}
	for _, c := range g.EdgeCat {
		if c < 0 {
			return fmt.Errorf("edge code %d", c)
		}
	}
	return nil
}

// edgeIndex is the index of edge (u, v), u < v, in g's sorted pairs, or
// −1.
func edgeIndex(g *Graph, u, v int32) int {
	e := g.Edges
	lo, hi := 0, len(e)/2
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if a, b := e[2*h], e[2*h+1]; a < u || (a == u && b < v) {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo < len(e)/2 && e[2*lo] == u && e[2*lo+1] == v {
		return lo
	}
	return -1
}

// setEdgeFeatures writes out's edge features for out.Edges: each edge
// takes those of edge k of the graph prov names for it (the edge it came
// from), or out.Fill when prov names none.
func setEdgeFeatures(out *Graph, prov func(u, v int32) (*Graph, int)) {
	m := out.NumEdges()
	kc, kd := int(out.EdgeCatCols), int(out.EdgeDim)
	out.EdgeCat = grow(out.EdgeCat, m*kc)
	out.EdgeX = grow(out.EdgeX, m*kd)
	for e := 0; e < m; e++ {
		cat, x := out.EdgeCat[e*kc:(e+1)*kc], out.EdgeX[e*kd:(e+1)*kd]
		g, k := prov(out.Edges[2*e], out.Edges[2*e+1])
		if g == nil {
			copy(cat, out.Fill.Codes)
			for j := range x {
				x[j] = out.Fill.X
			}
			continue
		}
		copy(cat, g.EdgeCat[k*kc:(k+1)*kc])
		copy(x, g.EdgeX[k*kd:(k+1)*kd])
	}
}

// identityEdges is setEdgeFeatures's provenance for an output whose node
// ids are in's: an edge of in keeps its features, a new one gets the fill.
func identityEdges(in *Graph) func(u, v int32) (*Graph, int) {
	return func(u, v int32) (*Graph, int) {
		if k := edgeIndex(in, u, v); k >= 0 {
			return in, k
		}
		return nil, 0
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4+8)
	}
	return s[:n]
}
