package loader_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/wire"
)

// twinLoader serves COLLAB-like graphs with policy view and the twin sets
// sets ("A / B" each).
func twinLoader(t testing.TB, dir, view string, workers int, sets ...string) *loader.Loader {
	t.Helper()
	return fixture.Loader(t, dir, nil, view, loader.Config{Seed: 7, BatchSize: 6, Workers: workers, Twins: fixture.Twins(t, sets...)})
}

// row is one served graph, its node ids relative to its own first node:
// comparable across batches and twins.
type row struct {
	id     int64
	nodes  int32
	policy string
	edges  [][2]int32 // directed, as served
	codes  []int32    // x_code
	weight []float32  // x_weight
}

// rows decodes a record batch's rows.
func rows(rec arrow.RecordBatch) []row {
	ids := rec.Column(0).(*array.Int64)
	nn := rec.Column(1).(*array.Int32)
	pol := rec.Column(rec.Schema().FieldIndices(wire.ColPolicy)[0]).(*array.String)
	src, off := listValues(rec, wire.ColEdgeSrc, i32)
	dst, _ := listValues(rec, wire.ColEdgeDst, i32)
	codes, coff := listValues(rec, wire.ColXCode, i32)
	ws, _ := listValues(rec, wire.ColXWeight, f32)
	var out []row
	base := int32(0)
	for i := range int(rec.NumRows()) {
		r := row{id: ids.Value(i), nodes: nn.Value(i), policy: pol.Value(i),
			codes: codes[coff[i]:coff[i+1]], weight: ws[coff[i]:coff[i+1]]}
		for e := off[i]; e < off[i+1]; e++ {
			r.edges = append(r.edges, [2]int32{src[e] - base, dst[e] - base})
		}
		base += r.nodes
		out = append(out, r)
	}
	return out
}

func sameRow(a, b row) bool {
	return a.id == b.id && a.nodes == b.nodes && a.policy == b.policy && slices.Equal(a.edges, b.edges) &&
		slices.Equal(a.codes, b.codes) && slices.Equal(a.weight, b.weight)
}

// twinRows splits a twin stream's batches into each twin's rows, checking
// the layout: k·n rows, graph i of every twin the same graph.
func twinRows(t *testing.T, recs []arrow.RecordBatch, k int) [][]row {
	t.Helper()
	out := make([][]row, k)
	for bi, rec := range recs {
		if got := wire.Copies(rec.Schema()); got != k {
			t.Fatalf("batch %d: schema says %d twins, want %d", bi, got, k)
		}
		rs := rows(rec)
		if len(rs)%k != 0 {
			t.Fatalf("batch %d: %d rows for %d twins", bi, len(rs), k)
		}
		n := len(rs) / k
		for tw := range k {
			for i := range n {
				if rs[tw*n+i].id != rs[i].id {
					t.Fatalf("batch %d: twin %d's graph %d is %d, twin 0's is %d: not aligned", bi, tw, i, rs[tw*n+i].id, rs[i].id)
				}
			}
			out[tw] = append(out[tw], rs[tw*n:(tw+1)*n]...)
		}
	}
	return out
}

// Twins are aligned (every graph at the same position in every twin),
// twin 0 is byte for byte the graph a daemon serving twin 0's schedule
// alone sends, twin 1 is exactly its op applied with the twin's own
// stream (a Go reference), and the stream's bytes do not depend on the
// workers.
func TestTwinsAligned(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 40, 3)
	const set = "dropnode:ratio=0.3 / subgraph:ratio=0.4"
	req := wire.Request{Epoch: 2, World: 1, Twins: 2}
	ref, recs := records(t, twinLoader(t, dir, "nodesam", 1, set), req)
	for _, w := range []int{2, 4} {
		if got, _ := records(t, twinLoader(t, dir, "nodesam", w, set), req); !bytes.Equal(got, ref) {
			t.Fatalf("%d workers: the twin stream differs from 1 worker's", w)
		}
	}
	tw := twinRows(t, recs, 2)
	if len(tw[0]) != 40 {
		t.Fatalf("%d graphs in twin 0, want 40", len(tw[0]))
	}
	// Twin 0: the single-schedule daemon's graphs, in the same order.
	_, single := records(t, fixture.Loader(t, dir, nil, "dropnode:ratio=0.3", loader.Config{Seed: 7, BatchSize: 6, Workers: 2}), wire.Request{Epoch: 2, World: 1})
	var alone []row
	for _, rec := range single {
		alone = append(alone, rows(rec)...)
	}
	for i := range alone {
		if !sameRow(tw[0][i], alone[i]) {
			t.Fatalf("twin 0's graph %d (id %d) differs from the dropnode daemon's", i, alone[i].id)
		}
	}
	// Twin 1: subgraph applied to the graph from stream OpSubgraph+TwinStride.
	l := twinLoader(t, dir, "nodesam", 1, set)
	op, err := aug.New("subgraph", map[string]string{"ratio": "0.4"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var in, out aug.Graph
	var sc aug.Scratch
	changed := 0
	for _, r := range tw[1] {
		if r.policy != "subgraph" {
			t.Fatalf("graph %d's twin 1 has policy %q", r.id, r.policy)
		}
		if err := l.Source().Load(context.Background(), r.id, &in); err != nil {
			t.Fatal(err)
		}
		if err := op.Apply(&in, &out, sc.Rand(7, 2, r.id, aug.OpSubgraph+aug.TwinStride), &sc); err != nil {
			t.Fatal(err)
		}
		var want [][2]int32
		for e := 0; e < len(out.Edges); e += 2 {
			u, v := out.Edges[e], out.Edges[e+1]
			want = append(want, [2]int32{u, v}, [2]int32{v, u})
		}
		got := slices.Clone(r.edges)
		cmp := func(a, b [2]int32) int { return int(a[0]-b[0])*1<<20 + int(a[1]-b[1]) }
		slices.SortFunc(got, cmp)
		slices.SortFunc(want, cmp)
		if r.nodes != out.N || !slices.Equal(got, want) {
			t.Fatalf("graph %d's twin 1: %d nodes, %d edges; the reference has %d, %d", r.id, r.nodes, len(got), out.N, len(want))
		}
		if r.nodes != in.N {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("subgraph kept every graph whole: the reference proves nothing")
	}
}

// Twins of a mixture draw their ops independently (each twin its own
// choice stream): with the same mixture in both twins, some graphs get
// different ops in their two copies.
func TestTwinsMixtureIndependent(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 40, 3)
	const mix = "dropnode:ratio=0.2,dropedge:ratio=0.2"
	_, recs := records(t, twinLoader(t, dir, "none", 2, mix+" / "+mix), wire.Request{Epoch: 1, World: 1, Twins: 2})
	tw := twinRows(t, recs, 2)
	differ := 0
	for i := range tw[0] {
		if tw[0][i].policy != tw[1][i].policy {
			differ++
		}
	}
	if differ == 0 || differ == len(tw[0]) {
		t.Fatalf("%d of %d graphs got different ops in their twins: the choices are not independent draws", differ, len(tw[0]))
	}
}

// A twin request resumed mid-epoch (start_batch) is the tail of the whole
// stream, and an elastic resume serves every graph's twins once, with the
// one-rank epoch's bytes.
func TestTwinsResume(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 40, 3)
	l := twinLoader(t, dir, "nodesam", 2, "dropedge:ratio=0.2 / attrmask:ratio=0.3", "subgraph / dropnode")
	req := wire.Request{Epoch: 4, World: 1, Twins: 2, TwinWeights: []float64{1, 2}}
	_, full := stream(t, l, req)
	for _, k := range []int{1, 3, len(full)} {
		r := req
		r.StartBatch = k
		_, tail := stream(t, l, r)
		testutil.CheckTail(t, full, tail, k)
	}
	one := req
	one.BatchSize = 1
	_, want := stream(t, l, one)
	var got [][32]byte
	counts := []int{7, 9}
	for r, c := range counts {
		q := one
		q.Rank, q.World, q.Count = r, 2, c
		_, d := stream(t, l, q)
		got = append(got, d...)
	}
	for r := range 3 {
		q := one
		q.Rank, q.World, q.Resume = r, 3, []wire.ResumePhase{{World: 2, Graphs: counts}}
		_, d := stream(t, l, q)
		got = append(got, d...)
	}
	sorted := func(d [][32]byte) [][32]byte {
		return slices.SortedFunc(slices.Values(d), func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	}
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Fatal("across both phases the twin pairs served are not the one-rank epoch's, each once")
	}
}

// JOAO's weights: a request's twin_weights change which set a graph's
// twins are drawn from, and nothing else. Weight 0 never draws its set;
// a graph that draws the same set under two weightings gets the same
// bytes; the identity says the weights.
func TestTwinWeights(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 3)
	l := twinLoader(t, dir, "nodesam", 2, "dropnode:ratio=0.3 / subgraph:ratio=0.4", "attrmask:ratio=0.3 / dropedge:ratio=0.3")
	serve := func(w ...float64) ([][]row, wire.Config) {
		req := wire.Request{Epoch: 3, World: 1, Twins: 2, TwinWeights: w}
		p, err := l.Plan(req)
		if err != nil {
			t.Fatal(err)
		}
		_, recs := records(t, l, req)
		return twinRows(t, recs, 2), p.Identity
	}
	setOf := func(r row) int {
		switch r.policy {
		case "dropnode":
			return 0
		case "attrmask":
			return 1
		}
		t.Fatalf("graph %d: twin 0 policy %q", r.id, r.policy)
		return -1
	}
	byID := func(tw [][]row) map[int64][2]row {
		m := map[int64][2]row{}
		for i := range tw[0] {
			m[tw[0][i].id] = [2]row{tw[0][i], tw[1][i]}
		}
		return m
	}
	only0, id0 := serve(1, 0)
	only1, id1 := serve(0, 5)
	mixed, idm := serve(1, 3)
	equal, ide := serve()
	for i := range only0[0] {
		if setOf(only0[0][i]) != 0 || setOf(only1[0][i]) != 1 {
			t.Fatalf("a graph drew a set of weight 0")
		}
	}
	n1 := 0
	for _, r := range mixed[0] {
		n1 += setOf(r)
	}
	if n1 < 30 || n1 > 58 { // 45 expected of 60 at weight 3/4
		t.Fatalf("%d of 60 graphs drew set 1 at weights 1:3", n1)
	}
	// The same set drawn, the same bytes: the weights change the draw only.
	a, b, c := byID(only0), byID(only1), byID(mixed)
	for id, pair := range c {
		ref := a[id]
		if setOf(pair[0]) == 1 {
			ref = b[id]
		}
		if !sameRow(pair[0], ref[0]) || !sameRow(pair[1], ref[1]) {
			t.Fatalf("graph %d: its twins under weights 1:3 differ from the same set's under 1:0 or 0:5", id)
		}
	}
	// The order of graphs is the permutation's, whatever the weights.
	for i := range mixed[0] {
		if mixed[0][i].id != equal[0][i].id {
			t.Fatal("the weights changed the epoch's order")
		}
	}
	ids := map[string]bool{}
	for _, id := range []wire.Config{id0, id1, idm, ide} {
		if id.Twins == "" || id.TwinWeights == "" || id.Check() != nil {
			t.Fatalf("identity %+v: want twins and weights, and a matching id", id)
		}
		ids[id.ID] = true
	}
	if len(ids) != 4 || idm.TwinWeights != "0.25,0.75" || ide.TwinWeights != "0.5,0.5" {
		t.Fatalf("identities %v; weights %q, %q", ids, idm.TwinWeights, ide.TwinWeights)
	}
	if plain := l.Identity(); plain.Twins != "" || plain.ID == idm.ID {
		t.Fatalf("the plain stream's identity %+v names twins", plain)
	}
}

// What a loader refuses, naming why: twins where none are declared, another
// count than the sets', weights for another number of sets.
func TestTwinsRefused(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 20, 3)
	plain := fixture.Loader(t, dir, nil, "nodesam", loader.Config{Seed: 7})
	l := twinLoader(t, dir, "nodesam", 1, "dropnode / subgraph")
	for _, c := range []struct {
		l    *loader.Loader
		req  wire.Request
		want string
	}{
		{plain, wire.Request{World: 1, Twins: 2}, "serves no twins"},
		{l, wire.Request{World: 1, Twins: 3}, "sets are of 2"},
		{l, wire.Request{World: 1, Twins: 2, TwinWeights: []float64{1, 1}}, "2 twin weights for the daemon's 1 twin sets"},
	} {
		_, err := c.l.Plan(c.req)
		if !errors.Is(err, epoch.ErrRange) || !bytes.Contains([]byte(fmt.Sprint(err)), []byte(c.want)) {
			t.Errorf("%+v: %v, want ErrRange saying %q", c.req, err, c.want)
		}
	}
	// Sets of different lengths are refused at configuration.
	cfg := loader.Config{Schedule: mustSchedule(t, "none"), Twins: fixture.Twins(t, "none / none", "none / none / none")}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err == nil {
		t.Fatal("twin sets of 2 and 3 accepted")
	}
}
