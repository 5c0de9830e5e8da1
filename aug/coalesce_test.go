package aug_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/testkit/testutil"
)

type directed struct{ s, d int32 }

// sortedDirected is the reference for Coalesced: both directions of every
// pair, offset by base, sorted by (source, target).
func sortedDirected(g *aug.Graph, base int32) []directed {
	var want []directed
	for k := 0; k < len(g.Edges); k += 2 {
		u, v := base+g.Edges[k], base+g.Edges[k+1]
		want = append(want, directed{u, v}, directed{v, u})
	}
	slices.SortFunc(want, func(a, b directed) int {
		if a.s != b.s {
			return int(a.s - b.s)
		}
		return int(a.d - b.d)
	})
	return want
}

func appended(c *aug.Coalesced, from int) []directed {
	var got []directed
	for k := from; k < c.Len(); k++ {
		got = append(got, directed{c.Src[k], c.Dst[k]})
	}
	return got
}

// TestCoalescedAppend: both directions of every pair, offset by the base,
// ordered by (source, target), for empty graphs, isolated nodes, stars,
// cliques, random graphs, and graphs of far more nodes than edges (taken
// by a sort, not a counter per node) appended one after another into one
// Coalesced.
func TestCoalescedAppend(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	star := aug.Graph{N: 6, Edges: []int32{0, 1, 0, 2, 0, 3, 0, 4, 0, 5}}
	tail := aug.Graph{N: 4, Edges: []int32{2, 3}}
	graphs := []aug.Graph{{N: 0}, {N: 3}, star, tail, testutil.DenseGraph(r, 0, 1, 1, 7), testutil.DenseGraph(r, 0, 5, 1, 7)}
	for range 40 {
		graphs = append(graphs, testutil.DenseGraph(r, 0, 1+r.IntN(60), r.Float64(), 7))
	}
	graphs = append(graphs, aug.Graph{N: 5000, Edges: []int32{3, 4000, 10, 11, 10, 4999, 11, 4000}}, aug.Graph{N: 1 << 20, Edges: []int32{0, 1 << 19}})
	var c aug.Coalesced
	deferred := aug.Coalesced{DeferSrc: true}
	for round := range 2 { // the second round reuses grown buffers
		c.Reset()
		deferred.Reset()
		base := int32(0)
		for i := range graphs {
			g := &graphs[i]
			from := c.Len()
			c.Append(g, base)
			deferred.Append(g, base)
			if got, want := appended(&c, from), sortedDirected(g, base); !slices.Equal(got, want) {
				t.Fatalf("round %d graph %d (n=%d, %d pairs): got %v, want %v", round, i, g.N, len(g.Edges)/2, got, want)
			}
			base += g.N
		}
		sameDeferred(t, &c, &deferred)
	}
}

// sameDeferred checks that d, filled under DeferSrc, holds what c holds
// without it: the same Dst, and Src as FillSrc writes it.
func sameDeferred(t *testing.T, c, d *aug.Coalesced) {
	t.Helper()
	if len(d.Src) != 0 {
		t.Fatalf("DeferSrc wrote %d sources", len(d.Src))
	}
	if d.Len() != c.Len() || !slices.Equal(d.Dst, c.Dst) {
		t.Fatalf("DeferSrc: Dst differs (%d against %d directed edges)", d.Len(), c.Len())
	}
	src := make([]int32, d.Len())
	d.FillSrc(src)
	if !slices.Equal(src, c.Src) {
		t.Fatalf("FillSrc differs from Src:\n%v\n%v", src, c.Src)
	}
}

// coalescedEqual checks ApplyCoalesced against Apply followed by Append,
// on the graph with and without its index, over several draws: the same
// directed edges appended at a running base into one reused Coalesced,
// the same features, labels and node count, and out.Edges left empty.
func coalescedEqual(t *testing.T, gs []aug.Graph, draws int) {
	t.Helper()
	ops := []aug.CoalescedApplier{aug.NodeSam{}, aug.NodeSamBase{}, aug.SplitOnly{}, aug.MergeOnly{}}
	var s1, s2, s3, s4 aug.Scratch
	var ref, fused, plainOut, deferOut aug.Graph
	var want, got, gotPlain aug.Coalesced
	gotDeferred := aug.Coalesced{DeferSrc: true} // indexed, its sources as runs
	base := int32(0)
	for i := range gs {
		if want.Len() > 1<<20 { // a batch's worth: start the next
			sameDeferred(t, &got, &gotDeferred)
			want.Reset()
			got.Reset()
			gotPlain.Reset()
			gotDeferred.Reset()
			base = 0
		}
		plain := gs[i]
		plain.Index = nil
		indexed := gs[i]
		indexed.Index = aug.BuildIndex(&indexed)
		for k := range draws {
			for _, op := range ops {
				seed := func(s *aug.Scratch) aug.Rand { return s.Rand(5, uint64(k), plain.ID, aug.OpID(op)) }
				if err := op.Apply(&plain, &ref, seed(&s1), &s1); err != nil {
					t.Fatal(err)
				}
				from := want.Len()
				want.Append(&ref, base)
				if err := op.ApplyCoalesced(&indexed, &fused, seed(&s2), &s2, &got, base); err != nil {
					t.Fatal(err)
				}
				if err := op.ApplyCoalesced(&plain, &plainOut, seed(&s3), &s3, &gotPlain, base); err != nil {
					t.Fatal(err)
				}
				if err := op.ApplyCoalesced(&indexed, &deferOut, seed(&s4), &s4, &gotDeferred, base); err != nil {
					t.Fatal(err)
				}
				w := appended(&want, from)
				if g := appended(&got, from); !slices.Equal(g, w) {
					t.Fatalf("%s graph %d (n=%d, m=%d) draw %d, indexed: got %v, want %v", op.Spec().Name, plain.ID, plain.N, len(plain.Edges)/2, k, g, w)
				}
				if g := appended(&gotPlain, from); !slices.Equal(g, w) {
					t.Fatalf("%s graph %d draw %d, unindexed: got %v, want %v", op.Spec().Name, plain.ID, k, g, w)
				}
				if len(fused.Edges) != 0 || len(plainOut.Edges) != 0 {
					t.Fatalf("%s: ApplyCoalesced left edges in out", op.Spec().Name)
				}
				ref.Edges = ref.Edges[:0]
				if !bytes.Equal(ref.AppendBinary(nil), fused.AppendBinary(nil)) || !bytes.Equal(ref.AppendBinary(nil), plainOut.AppendBinary(nil)) {
					t.Fatalf("%s graph %d (#%d, %v) draw %d: nodes, features or labels differ:\nApply          %+v\nindexed fused  %+v\nplain fused    %+v", op.Spec().Name, plain.ID, i, plain.Edges, k, ref, fused, plainOut)
				}
				base += ref.N
			}
		}
	}
	sameDeferred(t, &got, &gotDeferred)
}

func TestApplyCoalesced(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	gs := corpus(150)
	gs = append(gs, aug.Graph{ID: 900, N: 0}, *graph(1), *graph(2, 0, 1), *graph(3, 0, 1, 0, 2, 1, 2))
	for i, n := range []int{40, 74, 74, 120} {
		gs = append(gs, testutil.DenseGraph(r, int64(1000+i), n, 0.9, 7))
	}
	for i := range 30 { // small dense graphs: the touched nodes are most of them
		gs = append(gs, testutil.DenseGraph(r, int64(2000+i), 2+r.IntN(8), r.Float64(), 7))
	}
	coalescedEqual(t, gs, 20)
}

// TestDropOnly: a clean node's run is its input list less one value
// exactly when every touched key is a mark the list has and at most one
// such mark lacks a key; anything else is mergeRun's.
func TestDropOnly(t *testing.T) {
	marks := [4]int32{32, 19, 29, 74} // v_i, v_o, v_p, last (not an input node)
	for _, c := range []struct {
		name  string
		marks [4]int32
		mask  uint8
		ks    []int32
		d     int32
		ok    bool
	}{
		{"keeps v_i and v_o, drops v_p", marks, 0b111, []int32{19, 32}, 29, true},
		{"keeps all three", marks, 0b111, []int32{19, 29, 32}, -1, true},
		{"no mark, no key", marks, 0, nil, -1, true},
		{"drops its only mark", marks, 0b010, nil, 19, true},
		{"a key the list lacks", marks, 0b011, []int32{19, 29, 32}, -1, false},
		{"v_p's neighbour gains v_o", marks, 0b100, []int32{19}, -1, false},
		{"two to drop", marks, 0b111, []int32{19}, -1, false},
		{"equal marks count once", [4]int32{5, 5, 9, 12}, 0b0101, []int32{5}, 9, true},
	} {
		d, ok := aug.DropOnly(c.marks, c.mask, c.ks)
		if d != c.d || ok != c.ok {
			t.Errorf("%s: dropOnly = %d, %v; want %d, %v", c.name, d, ok, c.d, c.ok)
		}
	}
}

func TestDropRun(t *testing.T) {
	list := []int32{1, 3, 5, 8}
	for _, c := range []struct {
		d    int32
		want []int32
	}{
		{5, []int32{11, 13, 18}},
		{-1, []int32{11, 13, 15, 18}},
		{8, []int32{11, 13, 15}},
		{1, []int32{13, 15, 18}},
		{4, []int32{11, 13, 15, 18}}, // not in the list
	} {
		dst := make([]int32, len(list)+1) // the one slot of slack
		n := aug.DropRun(dst, list, c.d, 10)
		if !slices.Equal(dst[:n], c.want) {
			t.Errorf("dropRun(%d) = %v, want %v", c.d, dst[:n], c.want)
		}
	}
}

// collabBatch is one batch of 32 COLLAB-sized graphs (74 nodes, density
// 0.9, seeded), indexed as the loader indexes them.
func collabBatch() []aug.Graph {
	r := rand.New(rand.NewPCG(3, 4))
	graphs := make([]aug.Graph, 32)
	for i := range graphs {
		graphs[i] = testutil.DenseGraph(r, int64(i), 74, 0.9, 7)
		graphs[i].Index = aug.BuildIndex(&graphs[i])
	}
	return graphs
}

// BenchmarkCoalesce: one batch of 32 COLLAB-sized graphs (74 nodes,
// density 0.9 ≈ 2,460 pairs): NodeSam's output expanded by Append after
// Apply, against ApplyCoalesced on the indexed input, and Append alone.
func BenchmarkCoalesce(b *testing.B) {
	graphs := collabBatch()
	pairs := 0
	for i := range graphs {
		pairs += len(graphs[i].Edges) / 2
	}
	perEdge := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*pairs), "ns/directed-edge")
	}
	var c aug.Coalesced
	var s aug.Scratch
	var out aug.Graph
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Reset()
			base := int32(0)
			for i := range graphs {
				c.Append(&graphs[i], base)
				base += graphs[i].N
			}
		}
		perEdge(b)
	})
	b.Run("nodesam+append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Reset()
			base := int32(0)
			for i := range graphs {
				aug.NodeSam{}.Apply(&graphs[i], &out, s.Rand(1, 0, int64(i), aug.OpNodeSam), &s)
				c.Append(&out, base)
				base += out.N
			}
		}
		perEdge(b)
	})
	b.Run("nodesam-coalesced", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Reset()
			base := int32(0)
			for i := range graphs {
				aug.NodeSam{}.ApplyCoalesced(&graphs[i], &out, s.Rand(1, 0, int64(i), aug.OpNodeSam), &s, &c, base)
				base += out.N
			}
		}
		perEdge(b)
	})
}

// TestApplyLeavesInputAlone: no op writes to its input (the loader hands
// ops the shard's own memory), nor to SubMix's partner.
func TestApplyLeavesInputAlone(t *testing.T) {
	gs := corpus(60)
	for i := range gs {
		gs[i].Index = aug.BuildIndex(&gs[i])
	}
	partner := onePartner{gs[7]}
	partnerBytes := partner.g.AppendBinary(nil)
	var s aug.Scratch
	var out aug.Graph
	var c aug.Coalesced
	for _, op := range allOps(partner) {
		for i := range gs {
			in := &gs[i]
			before := in.AppendBinary(nil)
			if err := op.Apply(in, &out, s.Rand(9, 0, in.ID, aug.OpID(op)), &s); err != nil && op.Spec().Name != "submix" && op.Spec().Name != "submix-base" {
				t.Fatal(err)
			}
			if ca, ok := op.(aug.CoalescedApplier); ok {
				if err := ca.ApplyCoalesced(in, &out, s.Rand(9, 1, in.ID, aug.OpID(op)), &s, &c, 0); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(before, in.AppendBinary(nil)) {
				t.Fatalf("%s modified its input, graph %d", op.Spec().Name, in.ID)
			}
		}
		if !bytes.Equal(partnerBytes, partner.g.AppendBinary(nil)) {
			t.Fatalf("%s modified the partner", op.Spec().Name)
		}
	}
}

// BenchmarkFillSrc: writing a COLLAB-sized batch's deferred sources (32
// graphs of 74 nodes, runs of about 66) into a 32 MiB ring, each batch at
// the next place, as the loader writes them into the shared-memory ring
// (cold lines, not the collator's cached buffer).
func BenchmarkFillSrc(b *testing.B) {
	c := aug.Coalesced{DeferSrc: true}
	var s aug.Scratch
	var out aug.Graph
	base := int32(0)
	for i, g := range collabBatch() {
		if err := (aug.NodeSam{}).ApplyCoalesced(&g, &out, s.Rand(1, 0, int64(i), aug.OpNodeSam), &s, &c, base); err != nil {
			b.Fatal(err)
		}
		base += out.N
	}
	ring := make([]int32, 8<<20)
	n, at := c.Len(), 0
	b.SetBytes(int64(4 * n))
	b.ReportAllocs()
	for b.Loop() {
		if at+n > len(ring) {
			at = 0
		}
		c.FillSrc(ring[at : at+n])
		at += n + 16
	}
}
