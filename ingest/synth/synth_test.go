package synth_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/ingest/synth"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

func TestSynthCountsAndShape(t *testing.T) {
	cases := []struct {
		like      string
		graphs    int
		connected bool
	}{
		{"COLLAB", 60, true},
		{"REDDIT-BINARY", 40, true},
		{"reddit", 2, false},
	}
	for _, c := range cases {
		t.Run(c.like, func(t *testing.T) {
			spec, err := synth.Like(c.like)
			if err != nil {
				t.Fatal(err)
			}
			spec = spec.Scaled(c.graphs)
			dir := t.TempDir()
			tu := filepath.Join(dir, "tu")
			st, err := synth.Write(context.Background(), spec, 7, tu, false)
			if err != nil {
				t.Fatal(err)
			}
			if st.Graphs != int64(spec.Graphs) || st.Nodes != spec.Nodes || st.Edges != spec.Edges || st.SelfLoops != spec.SelfLoops {
				t.Fatalf("wrote %+v, spec %+v", st, spec)
			}
			res, err := convert.Run(context.Background(), convert.Options{Input: tu, Out: filepath.Join(dir, "s")})
			if err != nil {
				t.Fatal(err)
			}
			m := res.Manifest
			if m.Stats.Graphs != st.Graphs || m.Stats.Nodes != st.Nodes || m.Stats.Edges != st.Edges ||
				m.Stats.SelfLoopsDropped != st.SelfLoops || m.Stats.DuplicateEdgesDropped != 0 || m.Stats.AsymmetricEdges != 0 {
				t.Fatalf("converted stats %+v, generator %+v", m.Stats, st)
			}
			if !c.connected {
				return
			}
			r, err := shard.Open(context.Background(), filepath.Join(dir, "s"))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for id := range int64(r.NumGraphs()) {
				g, _ := r.Graph(id)
				if n := components(g); n != 1 {
					t.Fatalf("graph %d has %d components", id, n)
				}
			}
		})
	}
}

func components(g shard.Graph) int { return testutil.Components(g.NumNodes, g.Edges) }

func TestSynthDeterministic(t *testing.T) {
	spec, _ := synth.Like("COLLAB")
	spec = spec.Scaled(20)
	dir := t.TempDir()
	read := func(seed uint64, name string) []byte {
		out := filepath.Join(dir, name)
		if _, err := synth.Write(context.Background(), spec, seed, out, false); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, "COLLAB_A.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := read(1, "a"), read(1, "b"), read(2, "c")
	if !bytes.Equal(a, b) {
		t.Fatal("same seed wrote different bytes")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds wrote the same bytes")
	}
	if _, err := synth.Write(context.Background(), spec, 1, filepath.Join(dir, "a"), false); err == nil {
		t.Fatal("overwrote an existing folder without force")
	}
}
