package aug

import (
	"errors"
	"math"
	"math/bits"
	"runtime"
	"unsafe"
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

// Apply implements Op.
func (NodeSam) Apply(in, out *Graph, r Rand, s *Scratch) error {
	return nodeSam(in, out, r, s, true, true, true, nil, 0)
}

// Apply implements Op.
func (NodeSamBase) Apply(in, out *Graph, r Rand, s *Scratch) error {
	return nodeSam(in, out, r, s, true, false, true, nil, 0)
}

// Apply implements Op.
func (SplitOnly) Apply(in, out *Graph, r Rand, s *Scratch) error {
	return nodeSam(in, out, r, s, true, false, false, nil, 0)
}

// Apply implements Op.
func (MergeOnly) Apply(in, out *Graph, r Rand, s *Scratch) error {
	return nodeSam(in, out, r, s, false, false, true, nil, 0)
}

// ApplyCoalesced implements CoalescedApplier.
func (NodeSam) ApplyCoalesced(in, out *Graph, r Rand, s *Scratch, c *Coalesced, base int32) error {
	return nodeSam(in, out, r, s, true, true, true, c, base)
}

// ApplyCoalesced implements CoalescedApplier.
func (NodeSamBase) ApplyCoalesced(in, out *Graph, r Rand, s *Scratch, c *Coalesced, base int32) error {
	return nodeSam(in, out, r, s, true, false, true, c, base)
}

// ApplyCoalesced implements CoalescedApplier.
func (SplitOnly) ApplyCoalesced(in, out *Graph, r Rand, s *Scratch, c *Coalesced, base int32) error {
	return nodeSam(in, out, r, s, true, false, false, c, base)
}

// ApplyCoalesced implements CoalescedApplier.
func (MergeOnly) ApplyCoalesced(in, out *Graph, r Rand, s *Scratch, c *Coalesced, base int32) error {
	return nodeSam(in, out, r, s, false, false, true, c, base)
}

// nodeSam writes out's edges to out.Edges, or, when c is not nil, to c
// (offset by base) with out.Edges left empty (a graph with edge features
// is refused there: its features follow out.Edges).
func nodeSam(in, out *Graph, r Rand, s *Scratch, split, adjust, merge bool, c *Coalesced, base int32) error {
	n := in.N
	if c != nil && in.HasEdgeFeatures() {
		return errors.New("aug: nodesam: a graph with edge features cannot be written coalesced (apply, then append with its edges' ids)")
	}
	if n == 0 {
		out.CopyFrom(in)
		if c != nil {
			c.Append(out, base) // no node, no edge: appends nothing
			out.Edges = out.Edges[:0]
		}
		return nil
	}
	m := len(in.Edges) / 2
	sp := splitState{i: -1, k: n}
	n2 := n
	if split {
		sp.i = int32(r.IntN(int(n)))
		n2 = n + 1
		s.splitAt(in, &sp, r)
		s.added = s.added[:0]
		if adjust && len(s.nb) > 0 {
			s.adjust(in, sp.i, r)
		}
	}
	extra := 0 // G″ edges beyond the m original ones: (v_j, v_k) and the adjustment
	if split {
		extra = 1 + len(s.added)
	}
	out.ID, out.Label, out.MixLabel, out.Q = in.ID, in.Label, in.MixLabel, in.Q
	out.copyLayout(in)
	out.Index = nil
	out.Y = append(out.Y[:0], in.Y...)
	o, p, last := int32(-1), int32(-1), n2-1
	if merge && m+extra > 0 {
		o, p = s.g2Edge(in, &sp, r.IntN(m+extra))
		out.N = n2 - 1
	} else {
		out.N = n2 // SplitOnly, or MergeOnly on an edgeless graph
	}
	switch {
	case c == nil:
		s.emit(in, out, &sp, o, p, last, n2)
	case in.Index.valid(in):
		s.emitCoalesced(in, out, &sp, o, p, last, c, base)
	default:
		s.emit(in, out, &sp, o, p, last, n2)
		c.Append(out, base)
		out.Edges = out.Edges[:0]
	}
	s.features(in, out, n2, sp.i, o, p, last)
	if in.CatCols > 0 || in.HasEdgeFeatures() {
		s.nodeSamColumns(in, out, sp.i, o, p, last)
	}
	return nil
}

// nodeSamColumns writes out's format 3 node codes and edge features from
// where each output node came from: node z of out stands for the input
// nodes pre(z) — v_j and v_k (G″ node N) both for v_i; the merged node for
// v_o then v_p (G″ ids); node p, when renamed, for G″ node last. A node
// takes the codes of pre(z)[0] (a merged node v_o's: codes are never
// mixed). An edge (a, b) takes the features of the first input edge
// (x, y), x in pre(a), y in pre(b), x ≠ y (for a neighbour both merged
// nodes had, v_o's side): an edge moved by the split keeps its own, an
// adjustment edge (u, the other half) repeats (u, v_i)'s; the edge between
// the halves, which no input edge explains, gets the fill.
func (s *Scratch) nodeSamColumns(in, out *Graph, i, o, p, last int32) {
	n := in.N
	g2in := func(w int32) int32 {
		if i >= 0 && w == n {
			return i
		}
		return w
	}
	pre := func(z int32, buf []int32) []int32 {
		switch {
		case o >= 0 && z == o:
			return append(buf[:0], g2in(o), g2in(p))
		case o >= 0 && z == p && p != last:
			return append(buf[:0], g2in(last))
		}
		return append(buf[:0], g2in(z))
	}
	var pa, pb [2]int32
	if in.CatCols > 0 {
		f := int(in.CatCols)
		out.NodeCat = grow(out.NodeCat, int(out.N)*f)
		for z := int32(0); z < out.N; z++ {
			x := pre(z, pa[:0])[0]
			copy(out.NodeCat[int(z)*f:int(z+1)*f], in.NodeCat[int(x)*f:int(x+1)*f])
		}
	}
	if in.HasEdgeFeatures() {
		setEdgeFeatures(out, func(u, v int32) (*Graph, int) {
			for _, x := range pre(u, pa[:0]) {
				for _, y := range pre(v, pb[:0]) {
					if x != y {
						if k := edgeIndex(in, min(x, y), max(x, y)); k >= 0 {
							return in, k
						}
					}
				}
			}
			return nil, 0
		})
	}
}

// splitState is the split node i, its copy k (= N) and, per neighbour,
// the side it went to (s.side, valid where s.stamp == gen).
type splitState struct {
	i, k int32
	gen  uint32
}

func (sp *splitState) node(side int8) int32 {
	if side == 0 {
		return sp.i
	}
	return sp.k
}

// splitAt collects v_i's neighbours in id order (the sorted edge list
// lists (a, i) with a < i first, then (i, b)) and draws each one's side.
func (s *Scratch) splitAt(in *Graph, sp *splitState, r Rand) {
	n := int(in.N) + 1
	sp.gen = s.nextGen(n)
	if len(s.side) < n {
		s.side = make([]int8, n+n/4+8)
	}
	nb := s.nb[:0]
	i := sp.i
	if ix := in.Index; ix.valid(in) {
		nb = append(nb, ix.Adj[ix.Off[i]:ix.Off[i+1]]...)
	} else {
		for e := in.Edges; len(e) >= 2; e = e[2:] {
			switch i {
			case e[1]:
				nb = append(nb, e[0])
			case e[0]:
				nb = append(nb, e[1])
			}
		}
	}
	s.nb = nb
	for _, w := range s.nb {
		s.side[w] = int8(r.Uint64() & 1)
		s.stamp[w] = sp.gen
	}
}

// g2Edge returns edge e of G″ = (original edges with v_i replaced by the
// neighbour's side) ++ (v_j, v_k) ++ (adjustment edges), as (o, p), o < p.
func (s *Scratch) g2Edge(in *Graph, sp *splitState, e int) (int32, int32) {
	m := len(in.Edges) / 2
	switch {
	case e < m:
		a, b := in.Edges[2*e], in.Edges[2*e+1]
		switch sp.i {
		case a:
			a = sp.node(s.side[b])
		case b:
			b = sp.node(s.side[a])
		}
		return min(a, b), max(a, b)
	case e == m:
		return sp.i, sp.k
	}
	u := s.added[e-m-1]
	t := sp.node(1 - s.side[u])
	return min(u, t), max(u, t)
}

// adjustProb is each T_i member's probability of an adjustment edge:
// min(1, h_i/|T_i|) with c_i = |E| − 3t_i/d_i − 2 and
// h_i = (sqrt(c_i² + 4t_i|V| − 6t_i) − c_i)/2 (the paper's Algorithm 3).
func adjustProb(t, d, nv, m float64, sizeT int) float64 {
	c := m - 3*t/d - 2
	h := (math.Sqrt(c*c+4*t*nv-6*t) - c) / 2
	return math.Min(1, h/float64(sizeT))
}

// adjust computes t_i, T_i and h_i from the neighbourhood of v_i and draws
// the adjustment set into s.added (ids in increasing order). Triangles
// through v_i are the edges with both ends in N(v_i), counted with, per
// neighbour, how many it is in: O(deg(v_i)·log|E| + |E|).
func (s *Scratch) adjust(in *Graph, i int32, r Rand) {
	if ix := in.Index; ix.valid(in) {
		// Indexed: t_i and T_i (sorted, like the scan's order) are stored.
		ti, members := ix.Tri[i], ix.T[ix.TOff[i]:ix.TOff[i+1]]
		if ti == 0 {
			return
		}
		prob := adjustProb(float64(ti), float64(len(s.nb)), float64(in.N), float64(len(in.Edges)/2), len(members))
		for _, w := range members {
			if r.Float64() < prob {
				s.added = append(s.added, w)
			}
		}
		return
	}
	gen := s.gen // neighbours of i carry the split's stamp
	if len(s.inT) < int(in.N) {
		s.inT = make([]uint32, in.N+in.N/4+8)
	}
	// inT is only ever read for v_i's neighbours: clear exactly those, so
	// no mark from an earlier draw can survive. (Matching stamps alone is
	// not enough: the generation restarts whenever s.stamp grows, which
	// another op, e.g. SubMix sizing it by its partner, may cause while
	// inT keeps its old marks.)
	for _, w := range s.nb {
		s.inT[w] = 0
	}
	// Each triangle (i, a, b), a < b, is the edge (a, b) in a's forward
	// block (edges are sorted by u, so a block is found by binary search).
	// Only t_i and membership of T_i are needed: a block's matches are
	// counted in a register and members flagged with the stamp.
	var ti int64
	e := in.Edges
	m := len(e) / 2
	stamp, inT := s.stamp, s.inT // locals: stores through s would force reloads
	// Find each neighbour's block by binary search when v_i has few
	// neighbours, or by one forward walk (the neighbours are sorted too)
	// when it has many: both O(deg(v_i)·log|E| + |E|) at worst.
	walk := len(s.nb)*bits.Len(uint(m)) > m/4
	k0 := 0
	for _, a := range s.nb {
		var lo int
		if walk {
			for k0 < m && e[2*k0] < a {
				k0++
			}
			lo = k0
		} else {
			hi := m // first pair with u >= a
			for lo < hi {
				if h := int(uint(lo+hi) >> 1); e[2*h] < a {
					lo = h + 1
				} else {
					hi = h
				}
			}
		}
		cnt := 0
		for blk := e[2*lo:]; len(blk) >= 2 && blk[0] == a; blk = blk[2:] {
			if b := blk[1]; stamp[b] == gen {
				cnt++
				inT[b] = gen
			}
		}
		if cnt > 0 {
			inT[a] = gen
			ti += int64(cnt)
		}
	}
	if ti == 0 {
		return
	}
	var sizeT int
	for _, w := range s.nb {
		if s.inT[w] == gen {
			sizeT++
		}
	}
	prob := adjustProb(float64(ti), float64(len(s.nb)), float64(in.N), float64(len(in.Edges)/2), sizeT)
	for _, w := range s.nb {
		if s.inT[w] == gen && r.Float64() < prob {
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
	if !in.Dense && !in.oneHot() {
		out.X, out.FeatOff, out.Codes, out.Weights = out.X[:0], out.FeatOff[:0], out.Codes[:0], out.Weights[:0]
		return // format 3 without a float block: its codes are nodeSamColumns'
	}
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
			out.appendMix(in, z)
		default:
			z := src(y)
			out.appendMix(in, z)
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

// unalignedWords: the architecture loads and stores a uint64 at any
// 4-byte boundary (a list starts wherever its node's offset puts it), as
// amd64 and arm64 (the wheels' two) do; elsewhere addBase copies an id
// at a time. A constant: the other branch is compiled out.
const unalignedWords = runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"

// addBase writes src offset by base to dst and returns len(src). Two
// ids a step, as one uint64 plus base in both halves: ids and their sums
// are non-negative int32s, so no carry crosses from one half into the
// other, whatever the byte order. Half the loads, adds and stores of an
// id at a time: 1.3x its speed over an epoch of COLLAB-sized lists, and
// this copy is most of what NodeSam's coalesced emit does.
func addBase(dst, src []int32, base int32) int {
	n := len(src)
	dst = dst[:n]
	i := 0
	if n >= 2 && unalignedWords {
		both := uint64(uint32(base)) * (1<<32 | 1)
		s2 := unsafe.Slice((*uint64)(unsafe.Pointer(&src[0])), n/2)
		d2 := unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), n/2)
		for j, v := range s2 {
			d2[j] = v + both
		}
		i = n &^ 1
	}
	for ; i < n; i++ {
		dst[i] = src[i] + base
	}
	return n
}
