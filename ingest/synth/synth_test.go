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

// writeTwiceSame runs write into dir/a and dir/b and fails unless files
// are byte-identical in both; it returns dir/a.
func writeTwiceSame(t *testing.T, dir string, write func(out string) error, files ...string) string {
	t.Helper()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, out := range []string{a, b} {
		if err := write(out); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, _ := os.ReadFile(filepath.Join(b, f))
		if !bytes.Equal(x, y) {
			t.Fatalf("%s differs between two writes with the same seed", f)
		}
	}
	return a
}

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

// The molecule-shaped OGB folder converts to what it claims (OGB's
// column counts, 128 binary targets with about 60% missing, about 26
// atoms and 28 bonds a molecule), and the same seed writes the same bytes.
func TestWriteOGB(t *testing.T) {
	spec, ok := synth.LikeOGB("ogbg-molpcba")
	if !ok {
		t.Fatal("no ogbg-molpcba spec")
	}
	spec = spec.Scaled(2000)
	dir := t.TempDir()
	a := writeTwiceSame(t, dir, func(out string) error {
		_, err := synth.WriteOGB(context.Background(), spec, 7, out, false)
		return err
	}, "raw/edge.csv.gz", "raw/edge-feat.csv.gz", "raw/node-feat.csv.gz", "raw/graph-label.csv.gz", "split/scaffold/test.csv.gz")
	out := filepath.Join(dir, "shards")
	res, err := convert.Run(context.Background(), convert.Options{Input: a, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	missing := float64(m.Task.Missing) / float64(2000*128)
	atoms, bonds := float64(m.Stats.Nodes)/2000, float64(m.Stats.Edges)/2000
	if m.Task.Kind != shard.TaskBinary || m.Task.Targets != 128 || missing < 0.55 || missing > 0.65 ||
		m.NodeFeatures.Cols() != 9 || m.EdgeFeatures.Cols() != 3 || atoms < 24 || atoms > 28 || bonds < 26 || bonds > 30 {
		t.Fatalf("task %+v (%.2f missing), %d node and %d edge columns, %.1f atoms and %.1f bonds a molecule",
			m.Task, missing, m.NodeFeatures.Cols(), m.EdgeFeatures.Cols(), atoms, bonds)
	}
	if _, err := os.Stat(filepath.Join(out, "split-scaffold.json")); err != nil {
		t.Fatal(err)
	}
}

// ogbg-ppa-shaped folders: the same seed writes the same npz bytes, and
// they convert to graphs of about 243 nodes and 2,266 edges with seven
// float edge features, no node features, 37 classes and a species split.
func TestWritePPA(t *testing.T) {
	spec, ok := synth.LikePPA("ogbg-ppa")
	if !ok {
		t.Fatal("no ogbg-ppa spec")
	}
	spec = spec.Scaled(300)
	dir := t.TempDir()
	a := writeTwiceSame(t, dir, func(out string) error {
		_, err := synth.WritePPA(context.Background(), spec, 7, out, false)
		return err
	}, "raw/data.npz", "raw/graph-label.npz", "split/species/train.csv.gz")
	out := filepath.Join(dir, "shards")
	res, err := convert.Run(context.Background(), convert.Options{Input: a, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	nodes, edges := float64(m.Stats.Nodes)/300, float64(m.Stats.Edges)/300
	if m.Classes != 37 || m.NodeFeatures.Cols() != 0 || m.EdgeFeatures.DenseDim() != 7 || m.EdgeFeatures.Cols() != 0 ||
		nodes < 220 || nodes > 265 || edges < 1900 || edges > 2600 {
		t.Fatalf("%d classes, node columns %+v, edge columns %+v, %.1f nodes and %.1f edges a graph", m.Classes, m.NodeFeatures, m.EdgeFeatures, nodes, edges)
	}
	if _, err := os.Stat(filepath.Join(out, "split-species.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WritePPA(context.Background(), spec, 7, a, false); err == nil {
		t.Fatal("an existing folder was replaced without force")
	}
}

// malnet is TU text of sparse graphs of thousands of nodes.
func TestLikeMalnet(t *testing.T) {
	spec, err := synth.Like("malnet")
	if err != nil {
		t.Fatal(err)
	}
	spec = spec.Scaled(20)
	out := filepath.Join(t.TempDir(), "m")
	st, err := synth.Write(context.Background(), spec, 3, out, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Graphs != 20 || st.Nodes/20 < 5000 || st.Edges < st.Nodes {
		t.Fatalf("%+v", st)
	}
}
