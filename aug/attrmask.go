package aug

// AttrMask masks the node features of ⌊Ratio·N⌋ nodes drawn uniformly
// without replacement: GraphCL's attribute masking (You et al.,
// NeurIPS'20). A masked node's one-hot feature becomes the zero vector
// (formats 1 and 2: one pair, code 0 of weight 0, so every node still has
// a pair and a reader's bound of nodes by pairs holds), its float block
// zeros, and each of its
// categorical columns the column's reserved code, its vocabulary size (as
// the edge fill's: an embedding table of vocabulary+1 rows takes it).
// Structure, edge features, labels and targets are kept. Linear in nodes
// plus the features copied.
type AttrMask struct {
	Ratio float64 // fraction of the nodes masked, in [0, 1]
}

// DefaultAttrMaskRatio is the fraction GraphCL's experiments mask.
const DefaultAttrMaskRatio = 0.2

// Spec implements Op.
func (AttrMask) Spec() *Spec { return &specAttrMask }

func attrMaskOp(params map[string]string, _ Partners) (Op, error) {
	r, err := ratioParam("attrmask", params, DefaultAttrMaskRatio, true)
	return AttrMask{Ratio: r}, err
}

// Apply implements Op.
func (o AttrMask) Apply(in, out *Graph, r Rand, s *Scratch) error {
	out.CopyFrom(in)
	n := int(in.N)
	m := min(n, int(o.Ratio*float64(n)))
	if m == 0 {
		return nil
	}
	// The first m of a partial Fisher–Yates shuffle of the nodes.
	masked := s.drawSet(n, m, r)
	if f := int(in.CatCols); f > 0 {
		for _, v := range s.tmp[:m] {
			copy(out.NodeCat[int(v)*f:int(v+1)*f], in.CatVocab)
		}
	}
	if in.Dense {
		d := int(in.Dim)
		for _, v := range s.tmp[:m] {
			clear(out.X[int(v)*d : int(v+1)*d])
		}
	}
	if in.oneHot() {
		out.Codes, out.Weights = out.Codes[:0], out.Weights[:0]
		for v := int32(0); v < in.N; v++ {
			out.FeatOff[v] = int32(len(out.Codes))
			if s.stamp[v] == masked {
				out.Codes, out.Weights = append(out.Codes, 0), append(out.Weights, 0)
			} else {
				out.appendMix(in, v)
			}
		}
		out.FeatOff[in.N] = int32(len(out.Codes))
	}
	return nil
}
