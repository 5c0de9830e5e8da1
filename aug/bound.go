package aug

import "math"

// Size is a graph's node count, undirected edge count and largest degree.
type Size struct {
	Nodes, Edges, MaxDegree int
}

// Bound is an upper bound on the node and edge counts of op's output for
// an input of size in, whatever the draws (its MaxDegree is left 0): what the loader cuts batches by, so that node
// and edge budgets hold for what is sent, augmented. partnerEdges bounds
// the edges of any SubMix partner (the served set's largest graph). Each
// op's bound is derived, in the op table, from its algorithm:
//
//	none, dropedge, dropnode, changeattr, merge-only, nodesam-base: in
//	addedge:     one edge more
//	split-only:  one node more; the edge (v_j, v_k) and at most deg(v_i)
//	             adjustment edges more
//	nodesam:     the split's, then the merge removes a node and at least
//	             the merged edge
//	submix:      |V| unchanged; Ē = E1 ∪ E2 with E1 ⊆ E and E2 inside S′,
//	             |S′| = k ≤ ceil(p·|V|): at most min(k(k−1)/2, partnerEdges)
//
// The tests hold every op's outputs to its bound on random graphs and the
// real datasets.
func Bound(op Op, in Size, partnerEdges int) Size {
	out := in
	if b := op.Spec().bound; b != nil {
		out = b(op, in, partnerEdges)
	}
	out.MaxDegree = 0
	return out
}

func boundAddEdge(_ Op, in Size, _ int) Size {
	in.Edges++
	return in
}

func boundSplitOnly(_ Op, in Size, _ int) Size {
	if in.Nodes == 0 {
		return in
	}
	return Size{Nodes: in.Nodes + 1, Edges: in.Edges + 1 + in.MaxDegree}
}

func boundNodeSam(_ Op, in Size, _ int) Size {
	if in.Nodes == 0 {
		return in
	}
	return Size{Nodes: in.Nodes, Edges: in.Edges + in.MaxDegree}
}

func boundSubMix(op Op, in Size, partnerEdges int) Size {
	p := op.(SubMix).P
	if p == 0 {
		p = 0.4
	}
	k := min(in.Nodes, int(math.Ceil(p*float64(in.Nodes))))
	extra := min(k*(k-1)/2, partnerEdges)
	return Size{Nodes: in.Nodes, Edges: in.Edges + extra}
}

// SizeOf measures a graph given as n nodes and canonical edge pairs; deg is
// a reusable buffer (returned, grown to n).
func SizeOf(n int32, edges []int32, deg []int32) (Size, []int32) {
	deg = grow(deg, int(n))
	clear(deg)
	maxDeg := int32(0)
	for _, v := range edges {
		deg[v]++
		maxDeg = max(maxDeg, deg[v])
	}
	return Size{Nodes: int(n), Edges: len(edges) / 2, MaxDegree: int(maxDeg)}, deg
}
