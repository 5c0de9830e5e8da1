// Package aug implements graph augmentations for graph classification:
// NodeSam and SubMix (Park et al., "Model-Agnostic Augmentation for
// Accurate Graph Classification", WWW'22), their ablations, and simple
// baselines. It works on an in-memory Graph and knows nothing of shards.
//
// Contract:
//
//   - Every op is exact to the paper as pinned down in the project brief
//     and runs in time linear in nodes plus edges (SubMix adds a sort of
//     the root's component).
//   - Every random draw comes from the *rand.Rand the caller passes; the
//     loader seeds it from (seed, epoch, graph or position, operation) with
//     Stream, so the same tuple gives the same output bytes on any
//     goroutine.
//   - Outputs satisfy Check: edges once per undirected pair as (u, v),
//     u < v, sorted, no self-loops, ids in range; features of the right
//     shape; categorical features are sparse mixes of codes (a merge
//     averages one-hots) whose weights sum to 1.
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
)

// Graph is an undirected simple graph with node features and a label.
type Graph struct {
	ID int64 // graph id in the dataset (SubMix's partner source excludes it)
	N  int32 // nodes 0..N-1
	// Edges holds each undirected edge once as a pair (u, v), u < v; pairs
	// sorted by (u, v).
	Edges []int32

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

// CopyFrom makes g a deep copy of src, reusing g's buffers.
func (g *Graph) CopyFrom(src *Graph) {
	g.Index = nil
	g.ID, g.N, g.Dense, g.Dim = src.ID, src.N, src.Dense, src.Dim
	g.Label, g.MixLabel, g.Q = src.Label, src.MixLabel, src.Q
	g.Edges = append(g.Edges[:0], src.Edges...)
	g.FeatOff = append(g.FeatOff[:0], src.FeatOff...)
	g.Codes = append(g.Codes[:0], src.Codes...)
	g.Weights = append(g.Weights[:0], src.Weights...)
	g.X = append(g.X[:0], src.X...)
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
	if g.Dim < 1 {
		return bad("feature dim %d", g.Dim)
	}
	if g.Dense {
		if len(g.X) != int(g.N)*int(g.Dim) {
			return bad("%d dense values for %d nodes × dim %d", len(g.X), g.N, g.Dim)
		}
	} else {
		if len(g.FeatOff) != int(g.N)+1 || g.FeatOff[0] != 0 || int(g.FeatOff[g.N]) != len(g.Codes) || len(g.Codes) != len(g.Weights) {
			return bad("feature offsets do not fit %d nodes and %d codes", g.N, len(g.Codes))
		}
		for v := int32(0); v < g.N; v++ {
			lo, hi := g.FeatOff[v], g.FeatOff[v+1]
			if hi <= lo {
				return bad("node %d has no feature", v)
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

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4+8)
	}
	return s[:n]
}
