package aug

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Op is one augmentation. Apply writes the augmented in into out (reusing
// out's buffers) drawing only from r; in is not modified. Spec says what
// the op is (its entry of the op table).
type Op interface {
	Spec() *Spec
	Apply(in, out *Graph, r Rand, s *Scratch) error
}

// Spec is an op's entry in the op table, the one list every other list of
// ops derives from: the schedule grammar's names (New, Names), the stream
// id that keys its draws (OpID), whether it reads a graph's Index (the
// loader caches one per graph only when some op does), and whether it
// changes a graph at all (an evaluation view refuses augmenting ops unless
// told otherwise).
type Spec struct {
	Name string
	// ID keys the op's random stream (seed, epoch, graph, ID).
	ID uint64
	// Params are the KEY=VALUE parameters New accepts.
	Params []string
	// UsesIndex: Apply reads Graph.Index when it is set.
	UsesIndex bool
	// Augments is false only for the identity.
	Augments bool
	// Mixes: the op draws a partner graph (Partners), which a windowed
	// shuffle takes from the target's window.
	Mixes bool
	// Doc is one line for --help and docs/schedule.md.
	Doc string

	build func(params map[string]string, partners Partners) (Op, error)
	// bound is Bound for this op; nil: the output is no larger than the input.
	bound func(op Op, in Size, partnerEdges int) Size
}

func fixed(op Op) func(map[string]string, Partners) (Op, error) {
	return func(map[string]string, Partners) (Op, error) { return op, nil }
}

var (
	specNone        = Spec{Name: "none", ID: OpNone, Doc: "the graph unchanged", build: fixed(None{})}
	specNodeSam     = Spec{Name: "nodesam", ID: OpNodeSam, UsesIndex: true, Augments: true, Doc: "split, adjust and merge (paper Alg. 1-4)", build: fixed(NodeSam{}), bound: boundNodeSam}
	specNodeSamBase = Spec{Name: "nodesam-base", ID: OpNodeSamBase, UsesIndex: true, Augments: true, Doc: "NodeSam without the adjustment (ablation)", build: fixed(NodeSamBase{})}
	specSplitOnly   = Spec{Name: "split-only", ID: OpSplitOnly, UsesIndex: true, Augments: true, Doc: "NodeSam's split alone: N+1 nodes", build: fixed(SplitOnly{}), bound: boundSplitOnly}
	specMergeOnly   = Spec{Name: "merge-only", ID: OpMergeOnly, Augments: true, Doc: "NodeSam's merge alone: N-1 nodes", build: fixed(MergeOnly{})}
	specSubMix      = Spec{Name: "submix", ID: OpSubMix, Params: []string{"p", "self_loops"}, UsesIndex: true, Augments: true, Mixes: true, Doc: "PPR subgraph mix with a partner, soft label (paper Alg. 5-6); p: target ratio, default 0.4; self_loops=true: PageRank with a self-loop on every node (the reference implementation's variant)", build: subMix(false), bound: boundSubMix}
	specSubMixBase  = Spec{Name: "submix-base", ID: OpSubMixBase, Params: []string{"p"}, Augments: true, Mixes: true, Doc: "SubMix with uniform random node sets (ablation)", build: subMix(true), bound: boundSubMix}
	specDropEdge    = Spec{Name: "dropedge", ID: OpDropEdge, Params: []string{"ratio"}, Augments: true, Doc: "remove one uniform random edge; ratio=R: ⌊R·E⌋ of them, without replacement (GraphCL's edge perturbation)", build: dropEdgeOp}
	specDropNode    = Spec{Name: "dropnode", ID: OpDropNode, Params: []string{"ratio"}, Augments: true, Doc: "remove one uniform random node; ratio=R: ⌊R·N⌋ of them (at most N-1), without replacement, the kept nodes' induced subgraph (GraphCL's node dropping)", build: dropNodeOp}
	specAddEdge     = Spec{Name: "addedge", ID: OpAddEdge, Augments: true, Doc: "add one edge uniform over the non-adjacent pairs", build: fixed(AddEdge{}), bound: boundAddEdge}
	specSubgraph    = Spec{Name: "subgraph", ID: OpSubgraph, Params: []string{"ratio"}, Augments: true, Doc: "a connected subgraph grown from a random node over its frontier (GraphCL's subgraph view); ratio: fraction of nodes kept, default 0.2", build: subgraphOp}
	specAttrMask    = Spec{Name: "attrmask", ID: OpAttrMask, Params: []string{"ratio"}, Augments: true, Doc: "mask the features of a random fraction of the nodes (GraphCL's attribute masking): one-hot to zeros, floats to 0, codes to the column's reserved code; ratio: fraction masked, default 0.2", build: attrMaskOp}
	specChangeAttr  = Spec{Name: "changeattr", ID: OpChangeAttr, Augments: true, Doc: "change one uniform random node's feature", build: fixed(ChangeAttr{})}
)

// specs is the op table, in the order docs and --help list it.
var specs = []*Spec{&specNone, &specNodeSam, &specNodeSamBase, &specSplitOnly, &specMergeOnly,
	&specSubMix, &specSubMixBase, &specDropEdge, &specDropNode, &specAddEdge, &specChangeAttr, &specSubgraph, &specAttrMask}

// Spec implements Op.
func (None) Spec() *Spec { return &specNone }

// Spec implements Op.
func (NodeSam) Spec() *Spec { return &specNodeSam }

// Spec implements Op.
func (NodeSamBase) Spec() *Spec { return &specNodeSamBase }

// Spec implements Op.
func (SplitOnly) Spec() *Spec { return &specSplitOnly }

// Spec implements Op.
func (MergeOnly) Spec() *Spec { return &specMergeOnly }

// Spec implements Op.
func (m SubMix) Spec() *Spec {
	if m.Base {
		return &specSubMixBase
	}
	return &specSubMix
}

// Spec implements Op.
func (DropEdge) Spec() *Spec { return &specDropEdge }

// Spec implements Op.
func (DropNode) Spec() *Spec { return &specDropNode }

// Spec implements Op.
func (AddEdge) Spec() *Spec { return &specAddEdge }

// Spec implements Op.
func (ChangeAttr) Spec() *Spec { return &specChangeAttr }

func subMix(base bool) func(map[string]string, Partners) (Op, error) {
	return func(params map[string]string, partners Partners) (Op, error) {
		p := 0.4
		if v, ok := params["p"]; ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f < 1) {
				return nil, fmt.Errorf("aug: submix p=%q is not a number in (0, 1)", v)
			}
			p = f
		}
		loops := false
		if v, ok := params["self_loops"]; ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("aug: submix self_loops=%q is not true or false", v)
			}
			loops = b
		}
		return SubMix{P: p, Partners: partners, Base: base, SelfLoops: loops}, nil
	}
}

// Specs returns the op table (callers must not modify it).
func Specs() []*Spec { return specs }

// Names lists the ops New accepts, in table order.
func Names() []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// Lookup returns the spec of the op called name (case-insensitive), or nil.
func Lookup(name string) *Spec {
	name = strings.ToLower(name)
	for _, s := range specs {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// New returns the op called name with params (see Spec.Params). partners
// feeds SubMix.
func New(name string, params map[string]string, partners Partners) (Op, error) {
	s := Lookup(name)
	if s == nil {
		return nil, fmt.Errorf("aug: unknown policy %q (want one of %s)", name, strings.Join(Names(), ", "))
	}
	for k := range params {
		if !slices.Contains(s.Params, k) {
			if len(s.Params) == 0 {
				return nil, fmt.Errorf("aug: %s takes no parameters (%q given)", s.Name, k)
			}
			return nil, fmt.Errorf("aug: %s takes no parameter %q: its parameters are %s (e.g. %s:%s=…)", s.Name, k, strings.Join(s.Params, ", "), s.Name, s.Params[0])
		}
	}
	return s.build(params, partners)
}

// OpID is the stream id that keys op's draws.
func OpID(op Op) uint64 { return op.Spec().ID }
