package aug_test

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/testkit/testutil"
)

// randomGraph draws a simple graph with n nodes and about m edges (sorted,
// canonical) and categorical features, for self-contained tests.
func randomGraph(r *rand.Rand, id int64, n int32, m int) aug.Graph {
	g := aug.Graph{ID: id, N: n, Q: 1, Label: int32(r.IntN(3))}
	if n > 1 {
		seen := make(map[[2]int32]bool)
		for range m {
			u, v := int32(r.IntN(int(n))), int32(r.IntN(int(n)))
			if u == v {
				continue
			}
			k := [2]int32{min(u, v), max(u, v)}
			if !seen[k] {
				seen[k] = true
			}
		}
		for u := int32(0); u < n; u++ {
			for v := u + 1; v < n; v++ {
				if seen[[2]int32{u, v}] {
					g.Edges = append(g.Edges, u, v)
				}
			}
		}
	}
	codes := make([]int32, n)
	for i := range codes {
		codes[i] = int32(r.IntN(5))
	}
	g.SetCodes(codes, 5)
	return g
}

func corpus(count int) []aug.Graph {
	r := rand.New(rand.NewPCG(1, 2))
	gs := make([]aug.Graph, count)
	for i := range gs {
		n := int32(1 + r.IntN(40))
		gs[i] = randomGraph(r, int64(i), n, r.IntN(int(n)*3+1))
	}
	return gs
}

// allOps builds every op of the op table, in table order.
func allOps(p aug.Partners) []aug.Op {
	var ops []aug.Op
	for _, name := range aug.Names() {
		op, err := aug.New(name, nil, p)
		if err != nil {
			panic(err)
		}
		ops = append(ops, op)
	}
	return ops
}

// epochBytes augments every graph with op for (seed, epoch) using workers
// goroutines, each with its own scratch, and returns the outputs' bytes in
// graph order.
func epochBytes(t *testing.T, gs []aug.Graph, op aug.Op, seed, epoch uint64, workers int) []byte {
	out := make([][]byte, len(gs))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s aug.Scratch
			var g aug.Graph
			for i := w; i < len(gs); i += workers {
				if err := op.Apply(&gs[i], &g, s.Rand(seed, epoch, gs[i].ID, aug.OpID(op)), &s); err != nil {
					t.Error(err)
					return
				}
				out[i] = g.AppendBinary(nil)
			}
		}()
	}
	wg.Wait()
	return bytes.Join(out, nil)
}

func TestDeterminism(t *testing.T) {
	gs := corpus(300)
	for _, op := range allOps(uniformPartners{gs}) {
		t.Run(op.Spec().Name, func(t *testing.T) {
			one := epochBytes(t, gs, op, 9, 3, 1)
			if again := epochBytes(t, gs, op, 9, 3, 1); !bytes.Equal(one, again) {
				t.Fatal("repeated run differs")
			}
			if many := epochBytes(t, gs, op, 9, 3, 8); !bytes.Equal(one, many) {
				t.Fatal("8 goroutines differ from 1")
			}
			if _, ok := op.(aug.None); ok {
				return
			}
			if other := epochBytes(t, gs, op, 9, 4, 1); bytes.Equal(one, other) {
				t.Fatal("epochs 3 and 4 gave the same graphs")
			}
			if other := epochBytes(t, gs, op, 10, 3, 1); bytes.Equal(one, other) {
				t.Fatal("seeds 9 and 10 gave the same graphs")
			}
		})
	}
}

// TestGoldenStreams pins the real random streams: every op on a fixed corpus
// under seed 42, epoch 0, hashed per op. A change here changes every
// augmented epoch users have materialized (rewrite: go test ./aug -args -rewrite).
func TestGoldenStreams(t *testing.T) {
	gs := corpus(50)
	var buf bytes.Buffer
	for _, op := range allOps(uniformPartners{gs}) {
		sum := sha256.Sum256(epochBytes(t, gs, op, 42, 0, 1))
		buf.WriteString(op.Spec().Name)
		buf.WriteString(" ")
		for _, b := range sum[:8] {
			buf.WriteString(string("0123456789abcdef"[b>>4]) + string("0123456789abcdef"[b&15]))
		}
		buf.WriteString("\n")
	}
	testutil.Golden(t, testutil.Testdata(t, "golden", "aug-streams.txt"), buf.Bytes())
}

// TestNodeSamZeroAlloc: with a reused scratch and output, a NodeSam draw
// allocates nothing once buffers have grown.
func TestNodeSamZeroAlloc(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	gs := corpus(20)
	var s aug.Scratch
	var out aug.Graph
	for i := range gs { // warm up: grow every buffer
		aug.NodeSam{}.Apply(&gs[i], &out, s.Rand(1, 0, gs[i].ID, aug.OpNodeSam), &s)
	}
	i := 0
	allocs := testing.AllocsPerRun(200, func() {
		g := &gs[i%len(gs)]
		i++
		aug.NodeSam{}.Apply(g, &out, s.Rand(1, uint64(i), g.ID, aug.OpNodeSam), &s)
	})
	if allocs != 0 {
		t.Fatalf("NodeSam allocates %.1f times per draw in steady state", allocs)
	}
	// The fused form, on indexed graphs, into a batch's reused columns.
	var c aug.Coalesced
	for k := range gs {
		gs[k].Index = aug.BuildIndex(&gs[k])
	}
	batch := func(seed uint64) {
		c.Reset()
		base := int32(0)
		for k := range gs {
			aug.NodeSam{}.ApplyCoalesced(&gs[k], &out, s.Rand(seed, 0, gs[k].ID, aug.OpNodeSam), &s, &c, base)
			base += out.N
		}
	}
	for seed := range uint64(5) { // warm up: batches differ a little in size
		batch(1000 + seed)
	}
	seed := uint64(0)
	if allocs := testing.AllocsPerRun(50, func() { seed++; batch(seed) }); allocs != 0 {
		t.Fatalf("NodeSam ApplyCoalesced allocates %.1f times per batch in steady state", allocs)
	}
}

// TestScratchHistoryIndependent: an op's output must not depend on what the
// scratch was used for before (workers reuse scratch across graphs). The
// history grows the graphs so that the scratch's stamp array is
// reallocated and its generation counter restarts in between.
func TestScratchHistoryIndependent(t *testing.T) {
	gs := corpus(120)
	r := rand.New(rand.NewPCG(3, 4))
	var history []aug.Graph
	for i, n := range []int32{5, 40, 12, 90, 200, 30, 400, 8, 800} {
		history = append(history, randomGraph(r, int64(1000+i), n, int(n)*3))
	}
	for _, op := range allOps(uniformPartners{gs}) {
		t.Run(op.Spec().Name, func(t *testing.T) {
			for i := range gs {
				var fresh, used aug.Scratch
				var a, b, sink aug.Graph
				b.CopyFrom(&history[len(history)-1]) // outputs are reused too: start b dirty
				if err := op.Apply(&gs[i], &a, fresh.Rand(5, 1, gs[i].ID, aug.OpID(op)), &fresh); err != nil {
					t.Fatal(err)
				}
				for j := range history[:1+i%len(history)] {
					h := &history[j]
					for _, o := range allOps(uniformPartners{gs}) {
						o.Apply(h, &sink, used.Rand(9, uint64(j), h.ID, aug.OpID(o)), &used)
					}
					// NodeSam marks on small graphs, then SubMix with the
					// larger history graph as partner: that grows the stamp
					// array (restarting its generation) without growing what
					// NodeSam sized by its own graphs.
					for k := range 8 {
						g := &gs[(i+k)%len(gs)]
						aug.NodeSam{}.Apply(g, &sink, used.Rand(7, uint64(k), g.ID, aug.OpNodeSam), &used)
					}
					sm := aug.SubMix{P: 0.4, Partners: onePartner{*h}}
					sm.Apply(&gs[i], &sink, used.Rand(8, uint64(j), gs[i].ID, aug.OpSubMix), &used)
				}
				if err := op.Apply(&gs[i], &b, used.Rand(5, 1, gs[i].ID, aug.OpID(op)), &used); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a.AppendBinary(nil), b.AppendBinary(nil)) {
					t.Fatalf("graph %d: output depends on the scratch's history", gs[i].ID)
				}
			}
		})
	}
}

// TestStampRestartRegression pins the bug where NodeSam's triangle marks
// survived a restart of the scratch's stamp generation (caused by SubMix
// growing the stamp array for a large partner) and were read as current:
// the served stream then depended on which worker had seen which partner.
func TestStampRestartRegression(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	g1 := randomGraph(r, 1, 60, 400)
	g2 := randomGraph(r, 2, 60, 240)
	big := randomGraph(r, 3, 400, 1200)
	var used aug.Scratch
	var sink aug.Graph
	for k := range 300 { // marks with generations spread over ~600 values
		aug.NodeSam{}.Apply(&g1, &sink, used.Rand(1, uint64(k), g1.ID, aug.OpNodeSam), &used)
	}
	sm := aug.SubMix{P: 0.4, Partners: onePartner{big}}
	sm.Apply(&g2, &sink, used.Rand(2, 0, g2.ID, aug.OpSubMix), &used) // grows the stamp array
	for k := range 400 {
		var fresh aug.Scratch
		var a, b aug.Graph
		aug.NodeSam{}.Apply(&g2, &a, fresh.Rand(3, uint64(k), g2.ID, aug.OpNodeSam), &fresh)
		aug.NodeSam{}.Apply(&g2, &b, used.Rand(3, uint64(k), g2.ID, aug.OpNodeSam), &used)
		if !bytes.Equal(a.AppendBinary(nil), b.AppendBinary(nil)) {
			t.Fatalf("draw %d: NodeSam output depends on the scratch's history", k)
		}
	}
}
