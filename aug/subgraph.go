package aug

import (
	"fmt"
	"strconv"
)

// Subgraph keeps a connected subgraph grown from a uniform random node
// (ratio 1: the node's whole component):
// GraphCL's subgraph view (You et al., NeurIPS'20). Starting from the seed
// node, it adds a node drawn uniformly from the frontier (the nodes
// adjacent to those kept and not kept themselves) until it keeps
// max(1, ⌊Ratio·N⌋) nodes or the seed's component is exhausted, and
// returns the subgraph they induce: every edge between two kept nodes,
// node ids renumbered in their input order. Every kept node and edge keeps
// its features; targets and label are kept. Time and scratch are linear in
// nodes plus edges.
//
// GraphCL's reference code meant this growth but, by a discarded set
// union, only ever draws from the seed's own neighbours; the growth here
// is the one its paper describes.
type Subgraph struct {
	Ratio float64 // fraction of the nodes kept, in (0, 1]
}

// DefaultSubgraphRatio is the fraction GraphCL's unsupervised TU
// experiments keep.
const DefaultSubgraphRatio = 0.2

// Spec implements Op.
func (Subgraph) Spec() *Spec { return &specSubgraph }

func subgraphOp(params map[string]string, _ Partners) (Op, error) {
	r, err := ratioParam("subgraph", params, DefaultSubgraphRatio, false)
	return Subgraph{Ratio: r}, err
}

// ratioParam reads an op's ratio=R parameter: a number in [0, 1], or in
// (0, 1] unless zero is allowed; def when absent.
func ratioParam(op string, params map[string]string, def float64, zero bool) (float64, error) {
	v, ok := params["ratio"]
	if !ok {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1) || (f == 0 && !zero) {
		span := "(0, 1]"
		if zero {
			span = "[0, 1]"
		}
		return 0, fmt.Errorf("aug: %s ratio=%q is not a number in %s", op, v, span)
	}
	return f, nil
}

// Apply implements Op.
func (o Subgraph) Apply(in, out *Graph, r Rand, s *Scratch) error {
	n := int(in.N)
	k := max(1, int(o.Ratio*float64(n)))
	if n == 0 {
		out.CopyFrom(in)
		return nil
	}
	// The adjacency: the loader's index when the graph has one (the same
	// sorted runs, so the same draws), else built here.
	var off, adj []int32
	if in.Index != nil {
		off, adj = in.Index.Off, in.Index.Adj
	} else {
		s.csr(in.N, in.Edges)
		off, adj = s.off, s.adj
	}
	// Two fresh stamps: kept, and on the frontier.
	kept := s.nextGen(n)
	front := s.nextGen(n)
	frontier := s.tmp[:0]
	seed := int32(r.IntN(n))
	s.stamp[seed] = kept
	count := 1
	add := func(v int32) {
		for _, w := range adj[off[v]:off[v+1]] {
			if s.stamp[w] != kept && s.stamp[w] != front {
				s.stamp[w] = front
				frontier = append(frontier, w)
			}
		}
	}
	add(seed)
	for count < k && len(frontier) > 0 {
		i := r.IntN(len(frontier))
		v := frontier[i]
		frontier[i] = frontier[len(frontier)-1]
		frontier = frontier[:len(frontier)-1]
		s.stamp[v] = kept
		count++
		add(v)
	}
	s.tmp = frontier
	next := renumber(in, s, kept)
	if in.HasEdgeFeatures() {
		inducedEdges(in, out, s, kept)
	} else {
		// A few kept nodes of many: their sorted adjacency runs give the
		// induced pairs, in order (ids grow in input order), without a
		// pass over every edge.
		out.Edges = out.Edges[:0]
		out.EdgeCat, out.EdgeX = out.EdgeCat[:0], out.EdgeX[:0]
		for u := range n {
			if s.stamp[u] != kept {
				continue
			}
			nu := s.cnt[u]
			for _, w := range adj[off[u]:off[u+1]] {
				if int(w) > u && s.stamp[w] == kept {
					out.Edges = append(out.Edges, nu, s.cnt[w])
				}
			}
		}
	}
	inducedNodes(in, out, s, kept, next)
	return nil
}

// induced writes into out the subgraph of in induced by the nodes whose
// stamp is gen: every edge between two of them, with its features, node
// ids renumbered in input order (monotone, so pairs stay sorted), every
// kept node's features, the label and targets. Linear in nodes plus edges.
func induced(in, out *Graph, s *Scratch, gen uint32) {
	next := renumber(in, s, gen)
	inducedEdges(in, out, s, gen)
	inducedNodes(in, out, s, gen, next)
}

// renumber sets s.cnt[v] to node v's id among the nodes stamped gen, in
// input order, and returns their count.
func renumber(in *Graph, s *Scratch, gen uint32) int32 {
	n := int(in.N)
	s.cnt = grow(s.cnt, n)
	stamp, cnt := s.stamp[:n], s.cnt[:n]
	next := int32(0)
	for v := range stamp {
		if stamp[v] == gen {
			cnt[v] = next
			next++
		}
	}
	return next
}

// inducedEdges writes into out.Edges (and its edge features) every edge of
// in between two nodes stamped gen, renumbered by s.cnt (renumber).
func inducedEdges(in, out *Graph, s *Scratch, gen uint32) {
	stamp, cnt := s.stamp, s.cnt
	kc, kd := int(in.EdgeCatCols), int(in.EdgeDim)
	out.EdgeCat, out.EdgeX = out.EdgeCat[:0], out.EdgeX[:0]
	e := in.Edges
	out.Edges = out.Edges[:0]
	for k := 0; k+1 < len(e); k += 2 {
		u, v := e[k], e[k+1]
		if stamp[u] != gen || stamp[v] != gen {
			continue
		}
		out.Edges = append(out.Edges, cnt[u], cnt[v])
		if kc|kd != 0 {
			i := k / 2
			out.EdgeCat = append(out.EdgeCat, in.EdgeCat[i*kc:(i+1)*kc]...)
			out.EdgeX = append(out.EdgeX, in.EdgeX[i*kd:(i+1)*kd]...)
		}
	}
}

// inducedNodes writes into out everything but the edges: next nodes (those
// stamped gen), each with its features, the layout, label and targets.
func inducedNodes(in, out *Graph, s *Scratch, gen uint32, next int32) {
	n := int(in.N)
	out.Index = nil
	out.ID, out.N = in.ID, next
	out.copyLayout(in)
	out.Label, out.MixLabel, out.Q = in.Label, in.MixLabel, in.Q
	out.Y = append(out.Y[:0], in.Y...)
	f := int(in.CatCols)
	out.NodeCat = out.NodeCat[:0]
	d := 0
	if in.Dense {
		d = int(in.Dim)
	}
	out.X = out.X[:0]
	oneHot := in.oneHot()
	out.FeatOff, out.Codes, out.Weights = out.FeatOff[:0], out.Codes[:0], out.Weights[:0]
	for v := range n {
		if s.stamp[v] != gen {
			continue
		}
		out.NodeCat = append(out.NodeCat, in.NodeCat[v*f:(v+1)*f]...)
		out.X = append(out.X, in.X[v*d:(v+1)*d]...)
		if oneHot {
			out.FeatOff = append(out.FeatOff, int32(len(out.Codes)))
			out.appendMix(in, int32(v))
		}
	}
	if oneHot {
		out.FeatOff = append(out.FeatOff, int32(len(out.Codes)))
	}
}
