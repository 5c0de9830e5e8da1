package aug

import (
	"math"
)

// NodeSam is Algorithm 1 of the paper: split a uniform random node v_i into
// adjacent v_j, v_k (neighbours to either by a fair coin, features copied),
// adjust by connecting each u in T_i (neighbours of v_i in a triangle with
// it) with probability min(1, h_i/|T_i|) to whichever of v_j, v_k it is not
// yet connected to, then merge the endpoints of a uniform random edge into
// one node with the mean feature. |V| is unchanged, E[|Ē| − |E|] ≈ 0, the
// number of connected components is unchanged; O(d|V| + |E|).
//
// Node ids: v_j keeps v_i's id and v_k is id N; the merged node takes the
// smaller id of the pair, and node N moves into the freed larger id.
type NodeSam struct{}

// NodeSamBase is NodeSam without the adjustment (the paper's ablation).
type NodeSamBase struct{}

// SplitOnly is NodeSam's split alone: N+1 nodes.
type SplitOnly struct{}

// MergeOnly is NodeSam's merge alone on the input: N−1 nodes (unchanged
// when the graph has no edge).
type MergeOnly struct{}

// Name implements Op.
func (NodeSam) Name() string { return "nodesam" }

// Name implements Op.
func (NodeSamBase) Name() string { return "nodesam-base" }

// Name implements Op.
func (SplitOnly) Name() string { return "split-only" }

// Name implements Op.
func (MergeOnly) Name() string { return "merge-only" }

// Apply implements Op.
func (NodeSam) Apply(in, out *Graph, r Rand, s *Scratch) error {
	return nodeSam(in, out, r, s, true, true, true)
}

// Apply implements Op.
func (NodeSamBase) Apply(in, out *Graph, r Rand, s *Scratch) error {
	return nodeSam(in, out, r, s, true, false, true)
}

// Apply implements Op.
func (SplitOnly) Apply(in, out *Graph, r Rand, s *Scratch) error {
	return nodeSam(in, out, r, s, true, false, false)
}

// Apply implements Op.
func (MergeOnly) Apply(in, out *Graph, r Rand, s *Scratch) error {
	return nodeSam(in, out, r, s, false, false, true)
}

func nodeSam(in, out *Graph, r Rand, s *Scratch, split, adjust, merge bool) error {
	n := in.N
	if n == 0 {
		out.CopyFrom(in)
		return nil
	}
	m := int32(len(in.Edges) / 2)
	splitNode := int32(-1)
	n2 := n
	if !split {
		s.g2 = append(s.g2[:0], in.Edges...)
	} else {
		s.csr(n, in.Edges)
		i := int32(r.IntN(int(n)))
		splitNode, n2 = i, n+1
		nbrs := s.adj[s.off[i]:s.off[i+1]]
		// Split: each neighbour goes to v_j (= i, side 0) or v_k (= n, side 1).
		gen := s.nextGen(int(n2))
		if len(s.side) < int(n2) {
			s.side = make([]int8, n2+n2/4+8)
		}
		for _, w := range nbrs {
			s.side[w] = int8(r.Uint64() & 1)
			s.stamp[w] = gen
		}
		s.added = s.added[:0]
		if adjust && len(nbrs) > 0 {
			s.adjust(in, i, nbrs, gen, m, r)
		}
		// G″: original edges with v_i replaced by its neighbour's side,
		// then (v_j, v_k), then the adjustment edges.
		s.g2 = grow(s.g2, 2*int(m)+2+len(s.added))[:0]
		for k := 0; k < len(in.Edges); k += 2 {
			a, b := in.Edges[k], in.Edges[k+1]
			switch i {
			case a:
				a = sideNode(s.side[b], i, n)
			case b:
				b = sideNode(s.side[a], i, n)
			}
			s.g2 = append(s.g2, min(a, b), max(a, b))
		}
		s.g2 = append(s.g2, i, n)
		for _, u := range s.added {
			t := sideNode(1-s.side[u], i, n)
			s.g2 = append(s.g2, min(u, t), max(u, t))
		}
	}
	out.ID, out.Label, out.MixLabel, out.Q = in.ID, in.Label, in.MixLabel, in.Q
	out.Dense, out.Dim = in.Dense, in.Dim
	if !merge || len(s.g2) == 0 {
		// No merge (SplitOnly), or nothing to merge (MergeOnly on an
		// edgeless graph): G″ is the output.
		out.N = n2
		out.Edges = append(out.Edges[:0], s.g2...)
		s.sortPairs(n2, out.Edges)
		s.features(in, out, n2, splitNode, -1, -1, -1)
		return nil
	}
	e := int32(r.IntN(len(s.g2) / 2))
	o, p := s.g2[2*e], s.g2[2*e+1] // o < p
	last := n2 - 1
	id := func(x int32) int32 {
		switch x {
		case o, p:
			return o
		case last:
			return p
		}
		return x
	}
	gen := s.nextGen(int(n2))
	out.N = n2 - 1
	out.Edges = grow(out.Edges, len(s.g2))[:0]
	for k := 0; k < len(s.g2); k += 2 {
		a, b := id(s.g2[k]), id(s.g2[k+1])
		if a == b {
			continue // the merged edge
		}
		if a == o || b == o {
			other := a + b - o
			if s.stamp[other] == gen {
				continue // neighbour of both v_o and v_p: one edge
			}
			s.stamp[other] = gen
		}
		out.Edges = append(out.Edges, min(a, b), max(a, b))
	}
	s.sortPairs(out.N, out.Edges)
	s.features(in, out, n2, splitNode, o, p, last)
	return nil
}

func sideNode(side int8, j, k int32) int32 {
	if side == 0 {
		return j
	}
	return k
}

// adjust computes t_i, T_i and h_i from the neighbourhood of v_i and draws
// the adjustment set into s.added (ids in increasing order).
func (s *Scratch) adjust(in *Graph, i int32, nbrs []int32, gen uint32, m int32, r Rand) {
	// Triangles through i: edges among its neighbours. A neighbour w is in
	// T_i when it shares a neighbour with i. Work: Σ deg(w) ≤ 2|E|.
	var twice int64 // 2·t_i
	s.tmp = grow(s.tmp, len(nbrs))
	tcount := s.tmp
	for t, w := range nbrs {
		c := int32(0)
		for _, x := range s.adj[s.off[w]:s.off[w+1]] {
			if s.stamp[x] == gen && x != i {
				c++
			}
		}
		tcount[t] = c
		twice += int64(c)
	}
	ti := float64(twice / 2)
	if ti == 0 {
		return
	}
	di := float64(len(nbrs))
	var sizeT int
	for _, c := range tcount {
		if c > 0 {
			sizeT++
		}
	}
	nv := float64(in.N)
	c := float64(m) - 3*ti/di - 2
	h := (math.Sqrt(c*c+4*ti*nv-6*ti) - c) / 2
	prob := math.Min(1, h/float64(sizeT))
	for t, w := range nbrs {
		if tcount[t] > 0 && r.Float64() < prob {
			s.added = append(s.added, w)
		}
	}
}

// features writes out's features: node y of out takes the feature of its
// source in G″ (node n2−1 is a copy of splitNode when split), the merged
// node o the mean of o and p, and node p (when p ≠ last) the feature of
// G″ node last. o < 0 means no merge.
func (s *Scratch) features(in, out *Graph, n2, splitNode, o, p, last int32) {
	src := func(z int32) int32 {
		if splitNode >= 0 && z == in.N {
			return splitNode
		}
		return z
	}
	nOut := out.N
	if in.Dense {
		d := int(in.Dim)
		out.FeatOff, out.Codes, out.Weights = out.FeatOff[:0], out.Codes[:0], out.Weights[:0]
		out.X = grow(out.X, int(nOut)*d)
		for y := int32(0); y < nOut; y++ {
			row := out.X[int(y)*d : int(y+1)*d]
			switch {
			case y == o:
				a, b := src(o), src(p)
				ra, rb := in.X[int(a)*d:int(a+1)*d], in.X[int(b)*d:int(b+1)*d]
				for f := range row {
					row[f] = (ra[f] + rb[f]) / 2
				}
			case y == p && o >= 0:
				copy(row, in.X[int(src(last))*d:int(src(last)+1)*d])
			default:
				copy(row, in.X[int(src(y))*d:int(src(y)+1)*d])
			}
		}
		return
	}
	out.X = out.X[:0]
	out.FeatOff = grow(out.FeatOff, int(nOut)+1)
	out.Codes, out.Weights = out.Codes[:0], out.Weights[:0]
	for y := int32(0); y < nOut; y++ {
		out.FeatOff[y] = int32(len(out.Codes))
		switch {
		case y == o:
			s.mergeMix(in, out, src(o), src(p))
		case y == p && o >= 0:
			z := src(last)
			out.Codes = append(out.Codes, in.Codes[in.FeatOff[z]:in.FeatOff[z+1]]...)
			out.Weights = append(out.Weights, in.Weights[in.FeatOff[z]:in.FeatOff[z+1]]...)
		default:
			z := src(y)
			out.Codes = append(out.Codes, in.Codes[in.FeatOff[z]:in.FeatOff[z+1]]...)
			out.Weights = append(out.Weights, in.Weights[in.FeatOff[z]:in.FeatOff[z+1]]...)
		}
	}
	out.FeatOff[nOut] = int32(len(out.Codes))
}

// mergeMix appends the mean of the feature mixes of a and b, equal codes
// combined, codes in first-seen order (a's, then b's new ones).
func (s *Scratch) mergeMix(in, out *Graph, a, b int32) {
	start := len(out.Codes)
	for _, z := range [2]int32{a, b} {
		for k := in.FeatOff[z]; k < in.FeatOff[z+1]; k++ {
			c, w := in.Codes[k], in.Weights[k]/2
			found := false
			for t := start; t < len(out.Codes); t++ {
				if out.Codes[t] == c {
					out.Weights[t] += w
					found = true
					break
				}
			}
			if !found {
				out.Codes = append(out.Codes, c)
				out.Weights = append(out.Weights, w)
			}
		}
	}
}
