package aug

// None copies the graph (the identity policy).
type None struct{}

// DropEdge removes one uniformly random edge (unchanged without edges).
type DropEdge struct{}

// DropNode removes one uniformly random node and its edges; the last node
// takes its id (unchanged for a single-node graph).
type DropNode struct{}

// AddEdge adds one edge uniform over the non-adjacent pairs (unchanged when
// the graph is complete).
type AddEdge struct{}

// ChangeAttr changes one uniformly random node's feature: a categorical
// node gets a uniform random code (one-hot) of the dimension; a dense node
// gets the feature row of another uniformly random node; a node with
// categorical columns (shard format 3) gets, in one uniform random column,
// a uniform random code of that column's vocabulary.
type ChangeAttr struct{}

// Apply implements Op.
func (None) Apply(in, out *Graph, _ Rand, _ *Scratch) error {
	out.CopyFrom(in)
	return nil
}

// Apply implements Op.
func (DropEdge) Apply(in, out *Graph, r Rand, _ *Scratch) error {
	out.CopyFrom(in)
	if m := in.NumEdges(); m > 0 {
		e := r.IntN(m)
		out.Edges = append(out.Edges[:2*e], in.Edges[2*e+2:]...)
		// The edge's features go with it.
		kc, kd := int(in.EdgeCatCols), int(in.EdgeDim)
		out.EdgeCat = append(out.EdgeCat[:e*kc], in.EdgeCat[(e+1)*kc:]...)
		out.EdgeX = append(out.EdgeX[:e*kd], in.EdgeX[(e+1)*kd:]...)
	}
	return nil
}

// Apply implements Op.
func (DropNode) Apply(in, out *Graph, r Rand, s *Scratch) error {
	if in.N <= 1 {
		out.CopyFrom(in)
		return nil
	}
	x := int32(r.IntN(int(in.N)))
	last := in.N - 1
	out.ID, out.N = in.ID, in.N-1
	out.copyLayout(in)
	out.Label, out.MixLabel, out.Q = in.Label, in.MixLabel, in.Q
	out.Y = append(out.Y[:0], in.Y...)
	out.Edges = out.Edges[:0]
	for k := 0; k < len(in.Edges); k += 2 {
		u, v := in.Edges[k], in.Edges[k+1]
		if u == x || v == x {
			continue
		}
		if u == last {
			u = x
		}
		if v == last {
			v = x
		}
		out.Edges = append(out.Edges, min(u, v), max(u, v))
	}
	s.sortPairs(out.N, out.Edges)
	// Features: node x takes the last node's, and so do its edges.
	pre := func(z int32) int32 {
		if z == x {
			return last
		}
		return z
	}
	if in.HasEdgeFeatures() {
		setEdgeFeatures(out, func(u, v int32) (*Graph, int) {
			a, b := pre(u), pre(v)
			return in, edgeIndex(in, min(a, b), max(a, b)) // every edge of out is one of in's
		})
	}
	if f := int(in.CatCols); f > 0 {
		out.NodeCat = append(out.NodeCat[:0], in.NodeCat[:int(out.N)*f]...)
		if x != last {
			copy(out.NodeCat[int(x)*f:int(x+1)*f], in.NodeCat[int(last)*f:])
		}
	}
	if !in.Dense && !in.oneHot() {
		out.X, out.FeatOff, out.Codes, out.Weights = out.X[:0], out.FeatOff[:0], out.Codes[:0], out.Weights[:0]
		return nil
	}
	if in.Dense {
		d := int(in.Dim)
		out.FeatOff, out.Codes, out.Weights = out.FeatOff[:0], out.Codes[:0], out.Weights[:0]
		out.X = append(out.X[:0], in.X[:int(out.N)*d]...)
		if x != last {
			copy(out.X[int(x)*d:int(x+1)*d], in.X[int(last)*d:])
		}
		return nil
	}
	out.X = out.X[:0]
	out.FeatOff = grow(out.FeatOff, int(out.N)+1)
	out.Codes, out.Weights = out.Codes[:0], out.Weights[:0]
	for v := int32(0); v < out.N; v++ {
		z := v
		if v == x {
			z = last
		}
		out.FeatOff[v] = int32(len(out.Codes))
		out.appendMix(in, z)
	}
	out.FeatOff[out.N] = int32(len(out.Codes))
	return nil
}

// Apply implements Op. A uniform non-edge is drawn by rejection when the
// graph is sparse (expected < 2 tries) and by enumeration otherwise.
func (AddEdge) Apply(in, out *Graph, r Rand, s *Scratch) error {
	out.CopyFrom(in)
	n := int64(in.N)
	pairs := n * (n - 1) / 2
	m := int64(in.NumEdges())
	if pairs == m {
		return nil
	}
	s.csr(in.N, in.Edges)
	adjacent := func(u, v int32) bool {
		for _, w := range s.adj[s.off[u]:s.off[u+1]] {
			if w == v {
				return true
			}
		}
		return false
	}
	var u, v int32
	if 2*m <= pairs {
		for {
			u, v = int32(r.IntN(int(n))), int32(r.IntN(int(n)))
			if u != v && !adjacent(u, v) {
				break
			}
		}
	} else {
		// Dense: pick the t-th non-edge in (u, v) order.
		t := r.Int64N(pairs - m)
		gen := s.nextGen(int(n))
	scan:
		for u = 0; u < in.N; u++ {
			for _, w := range s.adj[s.off[u]:s.off[u+1]] {
				s.stamp[w] = gen
			}
			for v = u + 1; v < in.N; v++ {
				if s.stamp[v] != gen {
					if t == 0 {
						break scan
					}
					t--
				}
			}
			gen = s.nextGen(int(n))
		}
	}
	out.Edges = append(out.Edges, min(u, v), max(u, v))
	s.sortPairs(out.N, out.Edges)
	if in.HasEdgeFeatures() {
		setEdgeFeatures(out, identityEdges(in)) // the new edge: the fill
	}
	return nil
}

// Apply implements Op.
func (ChangeAttr) Apply(in, out *Graph, r Rand, _ *Scratch) error {
	out.CopyFrom(in)
	if in.N == 0 {
		return nil
	}
	x := int32(r.IntN(int(in.N)))
	if f := int(in.CatCols); f > 0 {
		c := r.IntN(f)
		out.NodeCat[int(x)*f+c] = int32(r.IntN(int(in.CatVocab[c])))
		return nil
	}
	if !in.Dense && !in.oneHot() {
		return nil // no node feature to change
	}
	if in.Dense {
		d := int(in.Dim)
		src := int32(r.IntN(int(in.N)))
		copy(out.X[int(x)*d:int(x+1)*d], in.X[int(src)*d:int(src+1)*d])
		return nil
	}
	c := int32(r.IntN(int(in.Dim)))
	// Rebuild the mixes with node x's replaced by one code.
	out.Codes, out.Weights = out.Codes[:0], out.Weights[:0]
	for v := int32(0); v < in.N; v++ {
		out.FeatOff[v] = int32(len(out.Codes))
		if v == x {
			out.Codes = append(out.Codes, c)
			out.Weights = append(out.Weights, 1)
			continue
		}
		out.appendMix(in, v)
	}
	out.FeatOff[in.N] = int32(len(out.Codes))
	return nil
}
