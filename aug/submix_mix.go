package aug

// SubMix's second half: the mixed graph built from the two chosen node
// sets (edges, features and the soft label). submix.go chooses the sets.

import (
	"math"
)

// mix builds Ē, the features and the soft label from s.set (S ⊆ G) and
// s.set2 (S′ ⊆ G′).
func (s *Scratch) mix(in, g2, out *Graph) {
	n := in.N
	gen := s.nextGen(int(max(n, g2.N)))
	s.pos = grow(s.pos, int(max(n, g2.N)))
	// In G: stamp S. E1 = edges of G not inside S.
	for i, v := range s.set {
		s.stamp[v], s.pos[v] = gen, int32(i)
	}
	// E1, in G's (sorted) order.
	s.e1 = s.e1[:0]
	for k := 0; k < len(in.Edges); k += 2 {
		u, v := in.Edges[k], in.Edges[k+1]
		if s.stamp[u] != gen || s.stamp[v] != gen {
			s.e1 = append(s.e1, u, v)
		}
	}
	e1 := len(s.e1) / 2
	// In G′: E2 = edges inside S′, mapped by rank to S.
	gen2 := s.nextGen(int(max(n, g2.N)))
	for i, v := range s.set2 {
		s.stamp[v], s.pos[v] = gen2, int32(i)
	}
	s.e2 = s.e2[:0]
	for k := 0; k < len(g2.Edges); k += 2 {
		u, v := g2.Edges[k], g2.Edges[k+1]
		if s.stamp[u] == gen2 && s.stamp[v] == gen2 {
			a, b := s.set[s.pos[u]], s.set[s.pos[v]]
			s.e2 = append(s.e2, min(a, b), max(a, b))
		}
	}
	total := e1 + len(s.e2)/2
	if total == 0 {
		s.unchanged++
		out.CopyFrom(in)
		return
	}
	out.ID, out.N = in.ID, n
	out.copyLayout(in)
	// E1 is sorted already and disjoint from E2 (whose edges lie inside
	// S): sorting E2 alone and merging gives the sorted union.
	s.sortPairs(n, s.e2)
	out.Edges = mergePairs(out.Edges[:0], s.e1, s.e2)
	out.Label, out.MixLabel = in.Label, g2.Label
	out.Q = float32(e1) / float32(total)
	mixTargets(out, in, g2, out.Q)
	// Features: S[i] takes S′[i]'s. Positions in S are stamped again for
	// the copy loop below.
	gen3 := s.nextGen(int(max(n, g2.N)))
	for i, v := range s.set {
		s.stamp[v], s.pos[v] = gen3, int32(i)
	}
	if in.HasEdgeFeatures() {
		// An edge inside S came from G′ (E2): the partner's edge between
		// the nodes mapped to its ends; any other kept G's own.
		setEdgeFeatures(out, func(u, v int32) (*Graph, int) {
			if s.stamp[u] == gen3 && s.stamp[v] == gen3 {
				a, b := s.set2[s.pos[u]], s.set2[s.pos[v]]
				return g2, edgeIndex(g2, min(a, b), max(a, b))
			}
			return in, edgeIndex(in, u, v)
		})
	}
	if f := int(in.CatCols); f > 0 {
		out.NodeCat = append(out.NodeCat[:0], in.NodeCat...)
		for i, v := range s.set {
			w := s.set2[i]
			copy(out.NodeCat[int(v)*f:int(v+1)*f], g2.NodeCat[int(w)*f:int(w+1)*f])
		}
	}
	if !in.Dense && !in.oneHot() {
		out.X, out.FeatOff, out.Codes, out.Weights = out.X[:0], out.FeatOff[:0], out.Codes[:0], out.Weights[:0]
		return
	}
	if in.Dense {
		d := int(in.Dim)
		out.FeatOff, out.Codes, out.Weights = out.FeatOff[:0], out.Codes[:0], out.Weights[:0]
		out.X = append(out.X[:0], in.X...)
		for i, v := range s.set {
			w := s.set2[i]
			copy(out.X[int(v)*d:int(v+1)*d], g2.X[int(w)*d:int(w+1)*d])
		}
		return
	}
	out.X = out.X[:0]
	out.FeatOff = grow(out.FeatOff, int(n)+1)
	out.Codes, out.Weights = out.Codes[:0], out.Weights[:0]
	for v := int32(0); v < n; v++ {
		out.FeatOff[v] = int32(len(out.Codes))
		src, z := in, v
		if s.stamp[v] == gen3 {
			src, z = g2, s.set2[s.pos[v]]
		}
		out.appendMix(src, z)
	}
	out.FeatOff[n] = int32(len(out.Codes))
}

// mixTargets sets out's float targets to q·in's + (1−q)·g2's, each
// target on its own: one missing (NaN) on a side that has weight stays
// missing — never a number made from the other side alone — and a side
// without weight (q = 1 or 0) leaves the other's as it is. Binary targets
// become soft ones in [0, 1], as a class label does.
func mixTargets(out, in, g2 *Graph, q float32) {
	out.Y = grow(out.Y, len(in.Y))
	for t, a := range in.Y {
		out.Y[t] = mixTarget(a, g2.Y[t], q)
	}
}

func mixTarget(a, b, q float32) float32 {
	switch {
	case q == 1:
		return a
	case q == 0:
		return b
	case a != a || b != b:
		return float32(math.NaN())
	}
	return q*a + (1-q)*b
}

// mergePairs appends the merge of two sorted lists of (u, v) pairs.
func mergePairs(dst, a, b []int32) []int32 {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i] < b[j] || (a[i] == b[j] && a[i+1] < b[j+1]) {
			dst = append(dst, a[i], a[i+1])
			i += 2
		} else {
			dst = append(dst, b[j], b[j+1])
			j += 2
		}
	}
	dst = append(dst, a[i:]...)
	return append(dst, b[j:]...)
}
