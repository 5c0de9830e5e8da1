package aug

// Working memory: what applying an op to one graph allocates, so that the
// loader can charge it to its memory budget before it starts, refuse a
// graph that could never fit, and keep per-graph indexes only where they
// cost about what the graph itself does. A graph's size alone does not
// bound this: a graph may declare 2^27 nodes and hold one edge, and every
// op keeps per-node scratch (a stamp, a degree, a CSR offset).

// FeatureBytes are the bytes of features one node and one edge carry in
// an aug.Graph (codes widened to int32, floats as float32; a one-hot code
// with its offset and weight is 12 bytes).
type FeatureBytes struct {
	Node, Edge int64
}

// workConst covers an application's fixed allocations (the random
// source, small slices, the Index's bitsets for graphs of up to 1,024
// nodes).
const workConst = 1 << 20

// workCoef is what an op allocates per node and per undirected edge of
// its input, beyond the features it copies: fitted over the op table on
// sparse and dense graphs of up to 200,000 nodes with room to spare, and
// held by TestWorkBounds (every op, indexed or not, with features or
// without: its allocations never exceed Work).
func workCoef(op Op) (node, edge int64) {
	switch op.Spec().ID {
	case OpNone, OpDropEdge, OpChangeAttr:
		return 0, 16
	case OpSubMix, OpSubMixBase:
		return 64, 192
	case OpDropNode:
		return 16, 96
	}
	return 16, 64 // the NodeSam family, addedge
}

// Work bounds the bytes an application of op to a graph of size in, with
// features feat, allocates: its scratch, its output and the input's own
// copy of its features. For SubMix, partner is the largest partner it may
// draw (its nodes and edges bounded separately), whose copy and scratch
// count too.
func Work(op Op, in Size, feat FeatureBytes, partner Size) int64 {
	node, edge := workCoef(op)
	one := func(s Size) int64 {
		n, m := int64(s.Nodes), int64(s.Edges)
		return node*n + edge*m + 3*(feat.Node*n+feat.Edge*m)
	}
	w := workConst + one(in)
	if id := op.Spec().ID; id == OpSubMix || id == OpSubMixBase {
		w += one(partner)
	}
	return w
}

// IndexBytes bounds what BuildIndex (and EnablePPR) allocate for a graph
// of size in.
func IndexBytes(in Size) int64 {
	return 48*int64(in.Nodes+in.Edges) + workConst
}
