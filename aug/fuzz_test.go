package aug_test

import (
	"context"
	"testing"

	"github.com/augloader/augloader/aug"
)

// graphFromBytes builds a canonical graph from fuzz input: the first byte
// sets the node count, following byte pairs are edges.
func graphFromBytes(id int64, data []byte) aug.Graph {
	g := aug.Graph{ID: id, Q: 1}
	if len(data) == 0 {
		return g
	}
	g.N = int32(data[0]%48) + 1
	adj := make([]bool, int(g.N)*int(g.N))
	for i := 1; i+1 < len(data); i += 2 {
		u, v := int32(data[i])%g.N, int32(data[i+1])%g.N
		if u != v {
			adj[min(u, v)*g.N+max(u, v)] = true
		}
	}
	for u := int32(0); u < g.N; u++ {
		for v := u + 1; v < g.N; v++ {
			if adj[u*g.N+v] {
				g.Edges = append(g.Edges, u, v)
			}
		}
	}
	codes := make([]int32, g.N)
	for i := range codes {
		codes[i] = int32(i % 3)
	}
	g.SetCodes(codes, 3)
	return g
}

type onePartner struct{ g aug.Graph }

func (p onePartner) Partner(_ context.Context, _ int64, _ aug.Rand, into *aug.Graph) error {
	into.CopyFrom(&p.g)
	return nil
}

// checkBound holds an op's output to aug.Bound (what batch budgets rely on).
func checkBound(t *testing.T, op aug.Op, in, out *aug.Graph, partnerEdges int) {
	t.Helper()
	size, _ := aug.SizeOf(in.N, in.Edges, nil)
	b := aug.Bound(op, size, partnerEdges)
	got, _ := aug.SizeOf(out.N, out.Edges, nil)
	if got.Nodes > b.Nodes || got.Edges > b.Edges {
		t.Fatalf("%s: output %+v exceeds its bound %+v (input %+v, partner edges %d)", op.Spec().Name, got, b, size, partnerEdges)
	}
}

// FuzzAugment runs every op on random graphs: the output must pass Check
// and stay within aug.Bound;
// NodeSam and SubMix keep the node count and the number of components.
func FuzzAugment(f *testing.F) {
	// Also: outputs are the same with and without the graph's index, and
	// ApplyCoalesced writes what Apply then Coalesced.Append would.
	f.Add([]byte{3, 0, 1, 1, 2, 0, 2}, []byte{2, 0, 1}, uint64(1))
	f.Add([]byte{1}, []byte{5}, uint64(2))
	f.Add([]byte{6, 0, 1, 2, 3, 4, 5}, []byte{4, 0, 1, 1, 2, 2, 3, 3, 0}, uint64(3))
	f.Fuzz(func(t *testing.T, a, b []byte, seed uint64) {
		in, partner := graphFromBytes(0, a), graphFromBytes(1, b)
		if in.N == 0 || partner.N == 0 {
			return
		}
		var s aug.Scratch
		var out aug.Graph
		comps := components(&in)
		indexEqual(t, []aug.Graph{in}, 2)
		coalescedEqual(t, []aug.Graph{in}, 2)
		for _, op := range allOps(onePartner{partner}) {
			if err := op.Apply(&in, &out, s.Rand(seed, 0, 0, aug.OpID(op)), &s); err != nil {
				t.Fatalf("%s: %v", op.Spec().Name, err)
			}
			if err := aug.Check(&out, 0); err != nil {
				t.Fatalf("%s: %v\nin %+v", op.Spec().Name, err, in)
			}
			checkBound(t, op, &in, &out, partner.NumEdges())
			switch o := op.(type) {
			case aug.NodeSam, aug.NodeSamBase:
				if out.N != in.N || components(&out) != comps {
					t.Fatalf("%s: %d nodes %d components, input %d, %d", op.Spec().Name, out.N, components(&out), in.N, comps)
				}
			case aug.SubMix:
				if out.N != in.N {
					t.Fatalf("%s: %d nodes, input %d", op.Spec().Name, out.N, in.N)
				}
				if !o.Base && components(&out) != comps {
					t.Fatalf("submix: %d components, input %d\nin %+v\npartner %+v\nout %+v", components(&out), comps, in, partner, out)
				}
			}
		}
	})
}
