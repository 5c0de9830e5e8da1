package convert

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

func convertTo(t *testing.T, o Options) *shard.Manifest {
	t.Helper()
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("convert %s: %v", o.Input, err)
	}
	// The summary line's phase split (bench/convert_collab.sh reads it).
	if res.ReadElapsed <= 0 || res.ReadElapsed > res.Elapsed {
		t.Errorf("convert %s: read phase %v outside (0, %v]", o.Input, res.ReadElapsed, res.Elapsed)
	}
	return res.Manifest
}

func openChecked(t *testing.T, dir string) *shard.Reader {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	r, err := shard.Open(context.Background(), dir, shard.WithAllocator(mem))
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() {
		r.Close()
		mem.AssertSize(t, 0)
	})
	return r
}

// The tiny fixture, written by hand: graph 1 is a triangle listed both ways
// plus a duplicate entry and a self-loop; graph 2 a path listed one way
// only; graph 3 an edge and an isolated node.
func TestTinyByHand(t *testing.T) {
	for _, input := range []string{testutil.Testdata(t, "tu", "TINY"), testutil.Testdata(t, "tu", "TINY.zip")} {
		t.Run(filepath.Base(input), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "tiny.shards")
			m := convertTo(t, Options{Input: input, Out: out})
			want := shard.Stats{Graphs: 3, Nodes: 9, Edges: 6, DirectedEntries: 12, SelfLoopsDropped: 1,
				DuplicateEdgesDropped: 1, AsymmetricEdges: 2, IsolatedNodes: 1, MaxNodes: 3, MaxEdges: 3}
			if m.Stats != want {
				t.Errorf("stats %+v\nwant  %+v", m.Stats, want)
			}
			if m.Classes != 2 || !slices.Equal(m.LabelMap, []string{"-1", "1"}) {
				t.Errorf("classes %d label map %v", m.Classes, m.LabelMap)
			}
			if m.Features.Kind != shard.FeatureLabels || m.Features.Dim != 4 || !m.HasEdgeLabels || m.EdgeLabelDim != 3 {
				t.Errorf("features %+v edge labels %v/%d", m.Features, m.HasEdgeLabels, m.EdgeLabelDim)
			}
			if len(m.Sources) != 5 { // node attributes are not read in labels mode
				t.Errorf("sources %+v, want 5 hashed files", m.Sources)
			}
			r := openChecked(t, out)
			cases := []shard.Graph{
				{ID: 0, Label: 1, NumNodes: 3, Edges: []int32{0, 1, 0, 2, 1, 2}, Codes: []int32{0, 1, 2}, EdgeLabels: []int32{0, 0, 0}},
				{ID: 1, Label: 0, NumNodes: 3, Edges: []int32{0, 1, 1, 2}, Codes: []int32{2, 1, 0}, EdgeLabels: []int32{2, 2}},
				{ID: 2, Label: 1, NumNodes: 3, Edges: []int32{0, 1}, Codes: []int32{3, 3, 3}, EdgeLabels: []int32{2}},
			}
			for _, w := range cases {
				g, err := r.Graph(w.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !graphEqual(g, w) {
					t.Errorf("graph %d = %+v\nwant %+v", w.ID, g, w)
				}
			}
			if _, err := r.Graph(3); !errors.Is(err, shard.ErrNotFound) {
				t.Errorf("Graph(3) err %v, want ErrNotFound", err)
			}
		})
	}
}

func graphEqual(a, b shard.Graph) bool {
	return a.ID == b.ID && a.Label == b.Label && a.NumNodes == b.NumNodes &&
		slices.Equal(a.Edges, b.Edges) && slices.Equal(a.Codes, b.Codes) &&
		slices.Equal(a.X, b.X) && slices.Equal(a.EdgeLabels, b.EdgeLabels)
}

func TestFeatureModes(t *testing.T) {
	in := testutil.Testdata(t, "tu", "TINY")
	t.Run("attributes", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "s")
		m := convertTo(t, Options{Input: in, Out: out, Features: ingest.FeaturesAttributes})
		if m.Features.Kind != shard.FeatureAttributes || m.Features.Dim != 2 {
			t.Fatalf("features %+v", m.Features)
		}
		g, _ := openChecked(t, out).Graph(1)
		if want := []float32{1, 1.5, 2, 1.5, 3, 1.5}; !slices.Equal(g.X, want) {
			t.Errorf("x %v want %v", g.X, want)
		}
	})
	t.Run("degree", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "s")
		m := convertTo(t, Options{Input: in, Out: out, Features: ingest.FeaturesDegree})
		// Degrees: triangle 2,2,2; path 1,2,1; last 1,1,0 -> vocabulary 0,1,2.
		if !slices.Equal(m.Features.Degrees, []int32{0, 1, 2}) || m.Features.Dim != 3 {
			t.Fatalf("features %+v", m.Features)
		}
		r := openChecked(t, out)
		for id, want := range [][]int32{{2, 2, 2}, {1, 2, 1}, {1, 1, 0}} {
			g, _ := r.Graph(int64(id))
			if !slices.Equal(g.Codes, want) {
				t.Errorf("graph %d codes %v want %v", id, g.Codes, want)
			}
		}
	})
}

// A file that lists edges out of graph order is re-read in buffered mode
// and gives the same shards.
func TestUnorderedEdges(t *testing.T) {
	src := testutil.Testdata(t, "tu", "TINY")
	dir := filepath.Join(t.TempDir(), "TINY")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	reverse := func(name string) {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		slices.Reverse(lines)
		os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	}
	reverse("TINY_A.txt")
	reverse("TINY_edge_labels.txt")
	a := openChecked(t, convertOut(t, src))
	b := openChecked(t, convertOut(t, dir))
	for id := range int64(3) {
		ga, _ := a.Graph(id)
		gb, _ := b.Graph(id)
		// Edge labels keep the first listed entry's label, which reversal changes.
		ga.EdgeLabels, gb.EdgeLabels = nil, nil
		if !graphEqual(ga, gb) {
			t.Errorf("graph %d: ordered %+v unordered %+v", id, ga, gb)
		}
	}
}

func convertOut(t *testing.T, in string) string {
	out := filepath.Join(t.TempDir(), "s")
	convertTo(t, Options{Input: in, Out: out})
	return out
}

func TestOutputSafety(t *testing.T) {
	in := testutil.Testdata(t, "tu", "TINY")
	parent := t.TempDir()
	out := filepath.Join(parent, "s")
	convertTo(t, Options{Input: in, Out: out})
	before, _ := os.ReadFile(filepath.Join(out, shard.ManifestName))
	if _, err := Run(context.Background(), Options{Input: in, Out: out}); !errors.Is(err, shard.ErrExists) {
		t.Fatalf("second convert without force: %v, want ErrExists", err)
	}
	// A failing forced conversion leaves the old output intact.
	bad := testutil.Testdata(t, "tu", "bad", "not_a_number")
	if _, err := Run(context.Background(), Options{Input: bad, Out: out, Name: "TINY", Force: true}); err == nil {
		t.Fatal("bad input converted")
	}
	after, _ := os.ReadFile(filepath.Join(out, shard.ManifestName))
	if string(before) != string(after) {
		t.Fatal("failed forced conversion changed the existing output")
	}
	convertTo(t, Options{Input: testutil.Testdata(t, "tu", "TINY.zip"), Out: out, Force: true, Features: ingest.FeaturesDegree})
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Errorf("parent holds %d entries after forced replace, want only the output", len(entries))
	}
}

// Golden bytes: the tiny dataset without compression is a byte-exact
// fixture of format v1 (rewrite with: go test ./ingest/convert -args -rewrite).
func TestGoldenShard(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s")
	convertTo(t, Options{Input: testutil.Testdata(t, "tu", "TINY"), Out: out, Compression: shard.CompressNone})
	for _, name := range []string{"shard-00000.arrow", shard.ManifestName, shard.GraphSizesName} {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		testutil.Golden(t, testutil.Testdata(t, "golden", "tiny.shards", name), got)
	}
}

// Golden bytes of format 3: a molecule-shaped OGB folder (two node and two
// edge columns, one two bytes wide, two targets with NaN, a split)
// without compression; tests/interop reads the same files with pyarrow.
func TestGoldenShardV3(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s")
	convertTo(t, Options{Input: testutil.Testdata(t, "ogb", "TINYMOL"), Out: out, Compression: shard.CompressNone})
	for _, name := range []string{"shard-00000.arrow", shard.ManifestName, shard.GraphSizesName, "split-s.json"} {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		testutil.Golden(t, testutil.Testdata(t, "golden", "tinymol.shards", name), got)
	}
}

// Every case of the bad-input corpus fails with a message naming the file
// and line (or field), and leaves no output and no temporary folder.
func TestBadInputCorpus(t *testing.T) {
	cases := []struct {
		name, input, features, want string
	}{
		{"missing_a", "missing_a", "", "TINY_A.txt: missing required file"},
		{"missing_indicator", "missing_indicator", "", "TINY_graph_indicator.txt: missing required file"},
		{"not_a_number", "not_a_number", "", `TINY_A.txt:4: field 2: "x" is not an integer`},
		{"missing_field", "missing_field", "", "TINY_A.txt:2: field 2: missing field"},
		{"node_out_of_range", "node_out_of_range", "", "TINY_A.txt:5: field 2: node 12 out of range 1..9"},
		{"edge_joins_graphs", "edge_joins_graphs", "", "TINY_A.txt:9: edge (3, 5) joins graph 1 and graph 2"},
		{"indicator_unsorted", "indicator_unsorted", "", "TINY_graph_indicator.txt:4: field 1: graph id 1 after 2: the indicator must be sorted"},
		{"indicator_skips", "indicator_skips", "", "TINY_graph_indicator.txt:7: field 1: graph id 4 after 2: graphs 3..3 have no nodes"},
		{"indicator_from_zero", "indicator_from_zero", "", "TINY_graph_indicator.txt:1: field 1: first graph id is 0, want 1"},
		{"graph_labels_count", "graph_labels_count", "", "TINY_graph_labels.txt: 2 labels for 3 graphs"},
		{"node_labels_count", "node_labels_count", "", "TINY_node_labels.txt: 8 node labels for 9 nodes"},
		{"edge_labels_count", "edge_labels_count", "", "TINY_edge_labels.txt: 3 edge labels for more edges in TINY_A.txt"},
		{"empty_dataset", "empty_dataset", "", "TINY_graph_indicator.txt: empty dataset"},
		{"blank_line", "blank_line", "", "TINY_A.txt:3: blank line inside the file"},
		{"attributes_ragged", "attributes_ragged", "attributes", "TINY_node_attributes.txt:3: 1 values, the first line has 2"},
		{"not_tu_zip", "not_tu.zip", "", "not a dataset this build reads"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			o := Options{Input: testutil.Testdata(t, "tu", "bad", c.input), Out: out, Features: ingest.FeatureMode(c.features)}
			if !strings.HasSuffix(c.input, ".zip") {
				o.Name = "TINY"
			}
			_, err := Run(context.Background(), o)
			if err == nil {
				t.Fatal("converted without error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\ndoes not contain %q", err, c.want)
			}
			if !errors.Is(err, ingest.ErrFormat) {
				t.Errorf("error %v is not ingest.ErrFormat", err)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("left %d entries behind (%s)", len(entries), entries[0].Name())
			}
		})
	}
}
