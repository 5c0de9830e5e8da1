package shard_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/augloader/augloader/atoms"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

// structure builds structure id of a format 4 test set: 1..9 atoms in a
// cell periodic on the axes id's low bits say, its neighbour list at 4 Å,
// energy on all but every third, forces per atom, a 3×3 stress on the
// fully periodic ones.
func structure(t testing.TB, id int64) shard.Graph {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(id), 9))
	n := 1 + r.IntN(9)
	g := shard.Graph{ID: id, NumNodes: int32(n), PBC: uint8(id % 8)}
	g.Cell = []float64{3 + r.Float64()*3, 0, 0, r.Float64(), 3 + r.Float64()*3, 0, r.Float64(), r.Float64(), 3 + r.Float64()*3}
	for range n {
		g.Numbers = append(g.Numbers, uint8(1+r.IntN(90)))
		g.Positions = append(g.Positions, r.Float64()*5, r.Float64()*5, r.Float64()*5)
	}
	var cell [9]float64
	copy(cell[:], g.Cell)
	var b atoms.Builder
	var l atoms.List
	pbc := [3]bool{g.PBC&1 != 0, g.PBC&2 != 0, g.PBC&4 != 0}
	if err := b.Build(g.Positions, &cell, pbc, 4, atoms.ConventionASE, &l); err != nil {
		t.Fatal(err)
	}
	for e := range l.Len() {
		g.Edges = append(g.Edges, l.I[e], l.J[e])
		g.Shifts = append(g.Shifts, int8(l.S[3*e]), int8(l.S[3*e+1]), int8(l.S[3*e+2]))
	}
	energy, forces, stress := []float64{r.NormFloat64()}, make([]float64, 3*n), []float64(nil)
	if id%3 == 2 {
		energy = nil
	}
	for i := range forces {
		forces[i] = r.NormFloat64()
	}
	if g.PBC == 7 {
		stress = []float64{1, 2, 3, 2, 4, 5, 3, 5, 6}
	}
	g.Props = [][]float64{energy, forces, stress}
	return g
}

// sameStructure compares two structures field by field (an empty slice
// and nil alike).
func sameStructure(a, b *shard.Graph) bool {
	if a.ID != b.ID || a.NumNodes != b.NumNodes || a.PBC != b.PBC || len(a.Props) != len(b.Props) ||
		!slices.Equal(a.Edges, b.Edges) || !slices.Equal(a.Shifts, b.Shifts) || !slices.Equal(a.Numbers, b.Numbers) ||
		!slices.Equal(a.Positions, b.Positions) || !slices.Equal(a.Cell, b.Cell) {
		return false
	}
	for k := range a.Props {
		if !slices.Equal(a.Props[k], b.Props[k]) {
			return false
		}
	}
	return true
}

func v4Options() shard.WriterOptions {
	return shard.WriterOptions{Dataset: "STRUCT", BatchGraphs: 5, Compression: shard.CompressZstd, ShardBytes: 8 << 10,
		Structures: &shard.Structures{Cutoff: 4, Neighbours: "ase", Properties: []shard.Property{
			{Name: "energy", Per: shard.PerStructure, Size: 1}, {Name: "forces", Per: shard.PerAtom, Size: 3},
			{Name: "stress", Per: shard.PerStructure, Size: 9}}}}
}

func writeStructures(t *testing.T, out string, n int64) *shard.Manifest {
	t.Helper()
	w, err := shard.NewWriter(out, v4Options())
	if err != nil {
		t.Fatal(err)
	}
	for id := range n {
		g := structure(t, id)
		if err := w.Append(&g); err != nil {
			w.Abort()
			t.Fatal(err)
		}
	}
	man, err := w.Finish(shard.Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	return man
}

// Structures round-trip through format 4, read whole and by the page
// under a cache limit: every field as written; the manifest counts the
// missing properties and the elements; verify passes and the graph-size
// index holds each structure's atoms, directed edges and largest
// out-degree.
func TestStructuresRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	const n = 60
	man := writeStructures(t, dir, n)
	if man.FormatVersion != shard.FormatV4 || man.Features.Kind != shard.FeatureStructures || len(man.Shards) < 2 {
		t.Fatalf("version %d, kind %q, %d shards", man.FormatVersion, man.Features.Kind, len(man.Shards))
	}
	s := man.Structures
	if s.Properties[0].Missing != n/3 || s.Properties[2].Missing != n-(n+1)/8 || len(s.Elements) < 10 || s.Units["length"] != "Å" {
		t.Fatalf("structures %+v", s)
	}
	if _, errs := shard.Verify(ctx, dir); len(errs) > 0 {
		t.Fatal(errs)
	}
	whole, err := shard.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	paged, err := shard.Open(ctx, dir, shard.WithCacheLimit(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer paged.Close()
	gs, err := whole.GraphSizes()
	if err != nil {
		t.Fatal(err)
	}
	for id := range int64(n) {
		want := structure(t, id)
		got, err := whole.Graph(id)
		if err != nil {
			t.Fatal(err)
		}
		if !sameStructure(&got, &want) {
			t.Fatalf("structure %d read back differs:\n got %+v\nwant %+v", id, got, want)
		}
		pg, rel, err := paged.Pin(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !sameStructure(&pg, &want) {
			t.Fatalf("structure %d read by the page differs", id)
		}
		rel()
		if gs.Nodes[id] != want.NumNodes || gs.Edges[id] != int32(want.NumEdges()) || gs.MaxDegree[id] != shard.MaxDegree(&want) {
			t.Fatalf("structure %d: sizes %d %d %d", id, gs.Nodes[id], gs.Edges[id], gs.MaxDegree[id])
		}
	}
}

// A damaged structure is refused naming it and the field: a position that
// is not finite, an atom id past the atoms, a shift along an axis that is
// not periodic, a property of the wrong length; and a manifest whose
// structures key is malformed.
func TestStructuresRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		edit func(*shard.Graph)
		want string
	}{
		{"forces-length", func(g *shard.Graph) { g.Props[1] = g.Props[1][:2] }, "property forces: 2 values"},
		{"atom", func(g *shard.Graph) { g.Edges = append(g.Edges, 0, g.NumNodes); g.Shifts = append(g.Shifts, 0, 0, 0) }, "atom"},
		{"z", func(g *shard.Graph) { g.Numbers[0] = 0 }, "atomic number 0"},
	} {
		w, err := shard.NewWriter(filepath.Join(t.TempDir(), "s"), v4Options())
		if err != nil {
			t.Fatal(err)
		}
		g := structure(t, 7)
		g.ID = 0
		c.edit(&g)
		err = w.Append(&g)
		w.Abort()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "structure 0") {
			t.Errorf("%s: Append says %v, want %q naming structure 0", c.name, err, c.want)
		}
	}
	// What a writer refuses, a reader refuses too: a file written by
	// another (here: the writer's checks bypassed by editing the manifest
	// to claim shifts are along a non-periodic axis).
	src := filepath.Join(t.TempDir(), "s")
	writeStructures(t, src, 10)
	for _, c := range []struct {
		edit func(m *shard.Manifest)
		want string
	}{
		{func(m *shard.Manifest) { m.Structures.Cutoff = -1 }, "structures.cutoff"},
		{func(m *shard.Manifest) { m.Structures.Neighbours = "vesin" }, "structures.neighbours"},
		{func(m *shard.Manifest) { m.Structures.Elements = []int{8, 1} }, "structures.elements"},
		{func(m *shard.Manifest) { m.Structures.Properties[0].Per = "bond" }, "structures.properties"},
		{func(m *shard.Manifest) { m.Structures = nil }, "structures"},
	} {
		dir := fixture.CopyDir(t, src)
		fixture.RewriteManifest(t, dir, c.edit)
		if _, err := shard.Open(ctx, dir); !errors.Is(err, shard.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a malformed structures key: %v, want a corrupt manifest naming %s", err, c.want)
		}
	}
}
