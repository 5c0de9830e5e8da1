package aug

// DropNodes removes ⌊Ratio·N⌋ nodes drawn uniformly without replacement
// (at most N−1: a graph keeps a node) with their edges: GraphCL's node
// dropping (You et al., NeurIPS'20), dropnode:ratio=R. The rest is the
// subgraph the kept nodes induce, ids renumbered in input order, every
// kept node and edge with its features. Linear in nodes plus edges.
// (dropnode without a ratio is DropNode: one node, the paper's baseline.)
type DropNodes struct {
	Ratio float64 // fraction of the nodes dropped, in [0, 1]
}

// DropEdges removes ⌊Ratio·E⌋ undirected edges drawn uniformly without
// replacement, each with its features: GraphCL's edge perturbation as its
// unsupervised TU code runs it (drop only), dropedge:ratio=R. GraphCL
// drops directed edges of PyG's both-direction list independently, which
// can leave one direction of an edge; an undirected edge here goes whole.
// Linear in edges. (dropedge without a ratio is DropEdge: one edge.)
type DropEdges struct {
	Ratio float64 // fraction of the edges dropped, in [0, 1]
}

// Spec implements Op.
func (DropNodes) Spec() *Spec { return &specDropNode }

// Spec implements Op.
func (DropEdges) Spec() *Spec { return &specDropEdge }

// dropNodeOp builds dropnode: one node, or a fraction with ratio=R.
func dropNodeOp(params map[string]string, _ Partners) (Op, error) {
	if _, ok := params["ratio"]; !ok {
		return DropNode{}, nil
	}
	r, err := ratioParam("dropnode", params, 0, true)
	return DropNodes{Ratio: r}, err
}

// dropEdgeOp builds dropedge: one edge, or a fraction with ratio=R.
func dropEdgeOp(params map[string]string, _ Partners) (Op, error) {
	if _, ok := params["ratio"]; !ok {
		return DropEdge{}, nil
	}
	r, err := ratioParam("dropedge", params, 0, true)
	return DropEdges{Ratio: r}, err
}

// drawSet stamps m of 0..n-1 drawn uniformly without replacement (the
// first m of a partial Fisher–Yates shuffle) with a fresh generation of
// s.stamp, which it returns.
func (s *Scratch) drawSet(n, m int, r Rand) uint32 {
	s.tmp = grow(s.tmp, n)
	for i := range s.tmp {
		s.tmp[i] = int32(i)
	}
	gen := s.nextGen(n)
	for i := range m {
		j := i + r.IntN(n-i)
		s.tmp[i], s.tmp[j] = s.tmp[j], s.tmp[i]
		s.stamp[s.tmp[i]] = gen
	}
	return gen
}

// Apply implements Op.
func (o DropNodes) Apply(in, out *Graph, r Rand, s *Scratch) error {
	n := int(in.N)
	m := min(max(n-1, 0), int(o.Ratio*float64(n)))
	if m == 0 {
		out.CopyFrom(in)
		return nil
	}
	dropped := s.drawSet(n, m, r)
	kept := s.nextGen(n)
	for v := range n {
		if s.stamp[v] != dropped {
			s.stamp[v] = kept
		}
	}
	induced(in, out, s, kept)
	return nil
}

// Apply implements Op.
func (o DropEdges) Apply(in, out *Graph, r Rand, s *Scratch) error {
	e := in.NumEdges()
	m := int(o.Ratio * float64(e))
	out.CopyFrom(in)
	if m == 0 {
		return nil
	}
	dropped := s.drawSet(e, m, r)
	kc, kd := int(in.EdgeCatCols), int(in.EdgeDim)
	out.Edges, out.EdgeCat, out.EdgeX = out.Edges[:0], out.EdgeCat[:0], out.EdgeX[:0]
	for k := range e {
		if s.stamp[k] == dropped {
			continue
		}
		out.Edges = append(out.Edges, in.Edges[2*k], in.Edges[2*k+1])
		out.EdgeCat = append(out.EdgeCat, in.EdgeCat[k*kc:(k+1)*kc]...)
		out.EdgeX = append(out.EdgeX, in.EdgeX[k*kd:(k+1)*kd]...)
	}
	return nil
}
