package loader_test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// writeMolecules writes n random format 3 graphs whose edge features name
// their edge: edge k of graph id has edge_x (id+1, k) and a code of its
// own, so a served row can be traced to the input edge it came from.
func writeMolecules(t *testing.T, n int) (string, []shard.Graph) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mol")
	w, err := shard.NewWriter(dir, shard.WriterOptions{
		Dataset:     "MOL",
		NodeColumns: &shard.Columns{Categorical: []shard.Column{{Name: "atom", Vocab: 9}, {Name: "chirality", Vocab: 3}}, Width: 1},
		EdgeColumns: &shard.Columns{Categorical: []shard.Column{{Name: "bond", Vocab: 4}}, Width: 1, Dense: 2},
		Task:        &shard.Task{Kind: shard.TaskBinary, Targets: 3},
		BatchGraphs: 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	var gs []shard.Graph
	for id := range int64(n) {
		nn := int32(2 + r.IntN(12))
		g := shard.Graph{ID: id, NumNodes: nn}
		for range nn {
			g.NodeCat.I32 = append(g.NodeCat.I32, int32(r.IntN(9)), int32(r.IntN(3)))
		}
		for u := range nn {
			for v := u + 1; v < nn; v++ {
				if v == u+1 || r.IntN(5) == 0 {
					g.EdgeCat.I32 = append(g.EdgeCat.I32, int32(r.IntN(4)))
					g.EdgeX = append(g.EdgeX, float32(id+1), float32(len(g.Edges)/2))
					g.Edges = append(g.Edges, u, v)
				}
			}
		}
		for range 3 {
			y := float32(r.IntN(2))
			if r.IntN(4) == 0 {
				y = float32(math.NaN())
			}
			g.Targets = append(g.Targets, y)
		}
		if err := w.Append(&g); err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	if _, err := w.Finish(shard.Manifest{}); err != nil {
		t.Fatal(err)
	}
	return dir, gs
}

func records(t *testing.T, l *loader.Loader, req wire.Request) ([]byte, []arrow.RecordBatch) {
	t.Helper()
	b, _ := stream(t, l, req)
	rd, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for rd.Next() {
		rec := rd.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if rd.Err() != nil {
		t.Fatal(rd.Err())
	}
	return b, recs
}

func listValues[T any](rec arrow.RecordBatch, name string, get func(arrow.Array, int) T) ([]T, []int32) {
	col := rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.List)
	vals := col.ListValues()
	out := make([]T, vals.Len())
	for i := range out {
		out[i] = get(vals, i)
	}
	return out, col.Offsets()
}

func u8(a arrow.Array, i int) int32    { return int32(a.(*array.Uint8).Value(i)) }
func f32(a arrow.Array, i int) float32 { return a.(*array.Float32).Value(i) }
func i32(a arrow.Array, i int) int32   { return a.(*array.Int32).Value(i) }
func same(a, b float32) bool           { return a == b || (a != a && b != b) }
func pack(u, v int32) [2]int32         { return [2]int32{u, v} }

// Molecule columns are served exactly (policy none: every directed edge
// with its own edge's features, the node codes, the targets with NaN);
// under NodeSam and SubMix every served edge's features are some input
// edge's (of the graph or a SubMix partner) or the declared fill, codes
// within their vocabularies, and the bytes do not depend on the workers.
func TestServedFeatures(t *testing.T) {
	dir, gs := writeMolecules(t, 60)
	req := wire.Request{World: 1, BatchSize: 8}

	none := fixture.Loader(t, dir, nil, "none", loader.Config{Seed: 5, BatchSize: 8, Workers: 2})
	_, recs := records(t, none, req)
	for _, rec := range recs {
		ids := rec.Column(0).(*array.Int64)
		src, off := listValues(rec, wire.ColEdgeSrc, i32)
		dst, _ := listValues(rec, wire.ColEdgeDst, i32)
		ecat, _ := listValues(rec, wire.ColEdgeCat, u8)
		ex, _ := listValues(rec, wire.ColEdgeX, f32)
		xcat, catOff := listValues(rec, wire.ColXCat, u8)
		tg, _ := listValues(rec, wire.ColTargets, f32)
		base := int32(0)
		for row := 0; row < int(rec.NumRows()); row++ {
			g := gs[ids.Value(row)]
			want := map[[2]int32]int{}
			for k := 0; k < len(g.Edges)/2; k++ {
				want[pack(g.Edges[2*k], g.Edges[2*k+1])] = k
				want[pack(g.Edges[2*k+1], g.Edges[2*k])] = k
			}
			if int(off[row+1]-off[row]) != len(want) {
				t.Fatalf("graph %d: %d directed edges, want %d", g.ID, off[row+1]-off[row], len(want))
			}
			for i := off[row]; i < off[row+1]; i++ {
				k, ok := want[pack(src[i]-base, dst[i]-base)]
				if !ok || ecat[i] != g.EdgeCat.I32[k] || ex[2*i] != g.EdgeX[2*k] || ex[2*i+1] != g.EdgeX[2*k+1] {
					t.Fatalf("graph %d: edge (%d,%d) served with code %d and %v", g.ID, src[i]-base, dst[i]-base, ecat[i], ex[2*i:2*i+2])
				}
			}
			for j, c := range xcat[catOff[row]:catOff[row+1]] {
				if c != g.NodeCat.I32[j] {
					t.Fatalf("graph %d: node code %d is %d, want %d", g.ID, j, c, g.NodeCat.I32[j])
				}
			}
			for k := range 3 {
				if !same(tg[3*row+k], g.Targets[k]) {
					t.Fatalf("graph %d: target %d is %v, want %v", g.ID, k, tg[3*row+k], g.Targets[k])
				}
			}
			base += g.NumNodes
		}
	}

	for _, pol := range []string{"nodesam", "submix:p=0.5", "dropedge:0.3,addedge:0.3,dropnode:0.4"} {
		one := fixture.Loader(t, dir, nil, pol, loader.Config{Seed: 5, BatchSize: 8, Workers: 1})
		four := fixture.Loader(t, dir, nil, pol, loader.Config{Seed: 5, BatchSize: 8, Workers: 4})
		b1, recs := records(t, one, req)
		b4, _ := records(t, four, req)
		if !bytes.Equal(b1, b4) {
			t.Fatalf("%s: 1 and 4 workers differ", pol)
		}
		fills := 0
		for _, rec := range recs {
			ecat, _ := listValues(rec, wire.ColEdgeCat, u8)
			ex, _ := listValues(rec, wire.ColEdgeX, f32)
			for i, c := range ecat {
				x0, x1 := ex[2*i], ex[2*i+1]
				if c == 4 && x0 == 0 && x1 == 0 {
					fills++
					continue
				}
				gid, k := int(x0)-1, int(x1)
				if gid < 0 || gid >= len(gs) || k < 0 || k >= len(gs[gid].Edges)/2 || float32(k) != x1 || gs[gid].EdgeCat.I32[k] != c {
					t.Fatalf("%s: served edge features (%d, %v, %v) are no input edge's and not the fill", pol, c, x0, x1)
				}
			}
		}
		if pol == "nodesam" && fills == 0 {
			t.Fatalf("nodesam: no split edge got the fill")
		}
	}
}

// attrmask on molecules: each served node's codes are its own or, for
// ⌊0.5·N⌋ nodes of every graph, each column's reserved code (its
// vocabulary size: 9 and 3); edges and targets are served as they are.
func TestServedAttrMask(t *testing.T) {
	dir, gs := writeMolecules(t, 40)
	l := fixture.Loader(t, dir, nil, "attrmask:ratio=0.5", loader.Config{Seed: 5, BatchSize: 8, Workers: 2})
	_, recs := records(t, l, wire.Request{World: 1, BatchSize: 8})
	seen := 0
	for _, rec := range recs {
		ids := rec.Column(0).(*array.Int64)
		xcat, catOff := listValues(rec, wire.ColXCat, u8)
		src, _ := listValues(rec, wire.ColEdgeSrc, i32)
		for row := 0; row < int(rec.NumRows()); row++ {
			g := gs[ids.Value(row)]
			codes := xcat[catOff[row]:catOff[row+1]]
			masked := 0
			for v := range int(g.NumNodes) {
				got, own := codes[2*v:2*v+2], g.NodeCat.I32[2*v:2*v+2]
				switch {
				case got[0] == 9 && got[1] == 3:
					masked++
				case got[0] != own[0] || got[1] != own[1]:
					t.Fatalf("graph %d node %d: codes %v, neither its own %v nor the mask", g.ID, v, got, own)
				}
			}
			if masked != int(g.NumNodes)/2 {
				t.Fatalf("graph %d: %d of %d nodes masked, want %d", g.ID, masked, g.NumNodes, g.NumNodes/2)
			}
			seen++
		}
		if len(src) == 0 {
			t.Fatal("no edges served")
		}
	}
	if seen != len(gs) {
		t.Fatalf("%d graphs served, want %d", seen, len(gs))
	}
}

// A declared edge fill (--edge-fill) is what NodeSam's new edges carry,
// and it is part of the identity; the default, declared or not, leaves
// the identity as it was. Bad fills are refused.
func TestEdgeFillDeclared(t *testing.T) {
	dir, gs := writeMolecules(t, 40)
	open := func(fill string) (*loader.Loader, error) {
		r, err := shard.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		src, err := loader.NewSource(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if fill != "" {
			if err := src.ParseEdgeFill(fill); err != nil {
				return nil, err
			}
		}
		sched, _ := epoch.ParseSchedule("nodesam")
		return loader.New(src, loader.Config{Seed: 5, BatchSize: 8, Workers: 2, Schedule: sched})
	}
	def, _ := open("")
	same, err := open("codes=4;x=0")
	if err != nil {
		t.Fatal(err)
	}
	if def.Identity() != same.Identity() || def.Identity().EdgeFill != "" {
		t.Fatalf("the default fill declared changed the identity: %+v vs %+v", def.Identity(), same.Identity())
	}
	l, err := open("codes=2;x=-1")
	if err != nil {
		t.Fatal(err)
	}
	if id := l.Identity(); id.EdgeFill != "codes=2;x=-1" || id.ID == def.Identity().ID {
		t.Fatalf("identity %+v does not say the fill", id)
	}
	if d := def.Identity().Diff(l.Identity()); len(d) != 1 || d[0] != "edge fill default vs codes=2;x=-1" {
		t.Fatalf("diff %q", d)
	}
	_, recs := records(t, l, wire.Request{World: 1, BatchSize: 8})
	fills := 0
	for _, rec := range recs {
		ecat, _ := listValues(rec, wire.ColEdgeCat, u8)
		ex, _ := listValues(rec, wire.ColEdgeX, f32)
		for i, c := range ecat {
			x0, x1 := ex[2*i], ex[2*i+1]
			if c == 2 && x0 == -1 && x1 == -1 {
				fills++
				continue
			}
			gid, k := int(x0)-1, int(x1)
			if gid < 0 || gid >= len(gs) || k < 0 || k >= len(gs[gid].Edges)/2 || gs[gid].EdgeCat.I32[k] != c {
				t.Fatalf("served edge features (%d, %v, %v) are no input edge's and not the declared fill", c, x0, x1)
			}
		}
	}
	if fills == 0 {
		t.Fatal("no split edge got the declared fill")
	}
	for fill, want := range map[string]string{
		"codes=9":      "edge fill code 9 of column",
		"codes=1,2":    "edge fill has 2 codes, the edges have 1 categorical columns",
		"x=nan":        `x "nan" is not a finite number`,
		"colour=1":     `unknown part "colour"`,
		"codes=a":      `code "a" is not an integer`,
		"codes=1;x=1;": `"" is not codes=… or x=…`,
	} {
		if _, err := open(fill); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", fill, err, want)
		}
	}
}
