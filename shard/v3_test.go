package shard_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/augloader/augloader/shard"
)

// molecule builds graph id of a format 3 test set: nodes with two
// categorical columns (codes depending on the node) and a float, edges a
// path with one categorical column and two floats, three targets with the
// second missing on odd graphs.
func molecule(id int64) shard.Graph {
	n := int32(2 + id%4)
	g := shard.Graph{ID: id, NumNodes: n}
	for v := int32(0); v < n; v++ {
		g.NodeCat.I32 = append(g.NodeCat.I32, (v+int32(id))%7, int32(id)%3)
		g.X = append(g.X, float32(v)/2)
	}
	for v := int32(0); v+1 < n; v++ {
		g.Edges = append(g.Edges, v, v+1)
		g.EdgeCat.I32 = append(g.EdgeCat.I32, (v+int32(id))%4)
		g.EdgeX = append(g.EdgeX, float32(id), float32(v))
	}
	g.Targets = []float32{float32(id) / 10, 1, float32(id % 2)}
	if id%2 == 1 {
		g.Targets[1] = float32(math.NaN())
	}
	return g
}

func v3Options(width int) shard.WriterOptions {
	return shard.WriterOptions{
		Dataset:     "MOL",
		NodeColumns: &shard.Columns{Categorical: []shard.Column{{Name: "atom"}, {Name: "charge"}}, Width: width, Dense: 1},
		EdgeColumns: &shard.Columns{Categorical: []shard.Column{{Name: "bond"}}, Width: width, Dense: 2},
		Task:        &shard.Task{Kind: shard.TaskRegression, Targets: 3, Names: []string{"a", "b", "c"}},
		BatchGraphs: 3, Compression: shard.CompressNone,
	}
}

func writeMolecules(t *testing.T, out string, o shard.WriterOptions, n int64) (*shard.Manifest, error) {
	t.Helper()
	w, err := shard.NewWriter(out, o)
	if err != nil {
		return nil, err
	}
	for id := range n {
		g := molecule(id)
		if err := w.Append(&g); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return w.Finish(shard.Manifest{})
}

// Format 3 round-trips every column: codes stored in the width asked,
// vocabularies grown to the codes written, NaN targets kept and counted,
// floats and edge features aligned with the edges; Verify passes and the
// layout describes it. Codes wider than the width are refused with
// ErrCodeWidth (a converter writes again, wider).
func TestFormatV3RoundTrip(t *testing.T) {
	for _, width := range []int{1, 2, 4} {
		out := filepath.Join(t.TempDir(), "s")
		man, err := writeMolecules(t, out, v3Options(width), 10)
		if err != nil {
			t.Fatal(err)
		}
		if man.FormatVersion != shard.FormatV3 || man.Task.Missing != 5 || man.NodeFeatures.Categorical[0].Vocab != 7 ||
			man.NodeFeatures.Categorical[1].Vocab != 3 || man.EdgeFeatures.Categorical[0].Vocab != 4 || len(man.Shards[0].Batches) != 4 {
			t.Fatalf("width %d: manifest %+v %+v %+v %+v", width, man.Task, man.NodeFeatures, man.EdgeFeatures, man.Shards)
		}
		r, err := shard.Open(context.Background(), out)
		if err != nil {
			t.Fatal(err)
		}
		for id := range int64(10) {
			got, err := r.Graph(id)
			if err != nil {
				t.Fatal(err)
			}
			want := molecule(id)
			stored := map[int]bool{1: got.NodeCat.U8 != nil, 2: got.NodeCat.U16 != nil, 4: got.NodeCat.I32 != nil}
			if !stored[width] {
				t.Fatalf("width %d: codes stored as %+v", width, got.NodeCat)
			}
			same := func(a, b []float32) bool {
				return slices.EqualFunc(a, b, func(x, y float32) bool { return x == y || (x != x && y != y) })
			}
			if got.NumNodes != want.NumNodes || !slices.Equal(got.Edges, want.Edges) ||
				!slices.Equal(got.NodeCat.AppendTo(nil), want.NodeCat.I32) || !slices.Equal(got.EdgeCat.AppendTo(nil), want.EdgeCat.I32) ||
				!same(got.X, want.X) || !same(got.EdgeX, want.EdgeX) || !same(got.Targets, want.Targets) {
				t.Fatalf("width %d, graph %d: %+v, want %+v", width, id, got, want)
			}
		}
		r.Close()
		if _, errs := shard.Verify(context.Background(), out); len(errs) > 0 {
			t.Fatalf("verify: %v", errs)
		}
		l := man.Layout()
		if l.OneHot != 0 || len(l.NodeCat) != 2 || l.NodeDense != 1 || len(l.EdgeCat) != 1 || l.EdgeDense != 2 || l.Targets != 3 || !l.EdgeFeatures() {
			t.Fatalf("layout %+v", l)
		}
	}
	// A code past the width's range.
	o := v3Options(1)
	w, err := shard.NewWriter(filepath.Join(t.TempDir(), "s"), o)
	if err != nil {
		t.Fatal(err)
	}
	g := molecule(0)
	g.NodeCat.I32[0] = 300
	if err := w.Append(&g); !errors.Is(err, shard.ErrCodeWidth) {
		t.Fatalf("a code of 300 in a uint8 column: %v", err)
	}
	w.Abort()
}

// A damaged format 3 shard is refused, naming the column: a code past its
// column's vocabulary, a feature list of the wrong length.
func TestFormatV3Corruption(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s")
	if _, err := writeMolecules(t, out, v3Options(1), 6); err != nil {
		t.Fatal(err)
	}
	// The vocabulary of "atom" lowered below its codes: the manifest is
	// resealed, so only the structural check can catch it.
	man, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	man.NodeFeatures.Categorical[0].Vocab = 3
	b, err := man.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, shard.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := shard.Open(context.Background(), out); !errors.Is(err, shard.ErrCorrupt) || !strings.Contains(err.Error(), "x_cat code") {
		t.Fatalf("codes past the vocabulary: %v", err)
	}
	// Format 3 keys in a format 2 manifest, and a task missing.
	for _, bad := range []func(m *shard.Manifest){
		func(m *shard.Manifest) { m.FormatVersion = shard.FormatV2 },
		func(m *shard.Manifest) { m.Task = nil },
		func(m *shard.Manifest) { m.Task.Kind = "ranking" },
		func(m *shard.Manifest) { m.NodeFeatures.Width = 3 },
	} {
		c := *man
		nf, ef, tk := *man.NodeFeatures, *man.EdgeFeatures, *man.Task
		c.NodeFeatures, c.EdgeFeatures, c.Task = &nf, &ef, &tk
		bad(&c)
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := shard.ParseManifest(b); !errors.Is(err, shard.ErrCorrupt) {
			t.Fatalf("manifest %+v parsed: %v", c, err)
		}
	}
}
