package loader

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

// TestCollatorFusedMix: a batch mixing graphs whose edges NodeSam wrote
// straight into the collator (fused, at its running base) with graphs
// expanded from their canonical pairs has the same columns as the batch
// built with every graph expanded.
func TestCollatorFusedMix(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var graphs []aug.Graph
	for i := range 24 {
		g := testutil.DenseGraph(r, int64(i), 1+r.IntN(50), r.Float64(), 4)
		g.Index = aug.BuildIndex(&g)
		graphs = append(graphs, g)
	}
	var s1, s2 aug.Scratch
	var out aug.Graph
	var ref, mixed collator
	lay := &shard.Layout{OneHot: 4}
	for round := range 2 { // the second round reuses grown buffers
		ref.reset(lay, 1, 1)
		mixed.reset(lay, 1, 1)
		for i := range graphs {
			g := &graphs[i]
			aug.NodeSam{}.Apply(g, &out, s1.Rand(1, uint64(round), g.ID, aug.OpNodeSam), &s1)
			ref.add(&out, "nodesam", false, false)
			fused := i%3 != 2
			if fused {
				aug.NodeSam{}.ApplyCoalesced(g, &out, s2.Rand(1, uint64(round), g.ID, aug.OpNodeSam), &s2, &mixed.edges, mixed.base)
			} else {
				aug.NodeSam{}.Apply(g, &out, s2.Rand(1, uint64(round), g.ID, aug.OpNodeSam), &s2)
			}
			mixed.add(&out, "nodesam", false, fused)
		}
		if !slices.Equal(ref.srcOff, mixed.srcOff) || !slices.Equal(ref.edges.Src, mixed.edges.Src) || !slices.Equal(ref.edges.Dst, mixed.edges.Dst) {
			t.Fatalf("round %d: edge columns differ", round)
		}
		if !slices.Equal(ref.featOff, mixed.featOff) || !slices.Equal(ref.xnode, mixed.xnode) || !slices.Equal(ref.xcode, mixed.xcode) || !slices.Equal(ref.nnodes, mixed.nnodes) {
			t.Fatalf("round %d: node columns differ", round)
		}
		if ref.base == 0 || len(ref.edges.Src) == 0 {
			t.Fatal("empty batch")
		}
	}
}

// A worker given back to the Loader's pool keeps its buffers but nothing
// of its stream: no plan, op or context, and no view of a page or an
// index (a cache limit may have let them go).
func TestWorkerDoneKeepsNoViews(t *testing.T) {
	l := &Loader{}
	r := rand.New(rand.NewPCG(3, 4))
	g := testutil.DenseGraph(r, 1, 30, 0.3, 4)
	w := newWorker(l, &Plan{}, nil)
	w.in = g
	w.in.Index = aug.BuildIndex(&g)
	w.in.EdgeBuf = append(w.in.EdgeBuf, g.Edges...)
	w.out.Index = w.in.Index
	w.ops = append(w.ops, aug.NodeSam{})
	w.done()
	switch {
	case w.l != nil || w.p != nil || w.pages != nil:
		t.Error("the pooled worker keeps its loader, plan or schedule")
	case w.in.Edges != nil || w.in.Index != nil || w.out.Index != nil:
		t.Error("the pooled worker keeps its last input's edges or an index")
	case len(w.ops) != 0 || slices.ContainsFunc(w.ops[:cap(w.ops)], func(op aug.Op) bool { return op != nil }):
		t.Error("the pooled worker keeps an op")
	case len(w.in.EdgeBuf) == 0 || len(w.in.Codes) == 0:
		t.Error("the pooled worker dropped its own buffers")
	}
}
