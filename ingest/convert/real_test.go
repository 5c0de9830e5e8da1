package convert

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/tu"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

// realDatasets are the copies in ../shared/datasets with the counts of the
// paper's Table 2 (and TU's published statistics for the rest).
var realDatasets = []struct {
	name, path           string
	graphs, nodes, edges int64
	classes, featureDim  int
	kind                 shard.FeatureKind
	heavy                bool // skipped under -race; run by make test without it
}{
	{"MUTAG", "tu/MUTAG", 188, 3371, 3721, 2, 7, shard.FeatureLabels, false},
	{"PTC_MR", "tu/PTC_MR", 344, 4915, 5054, 2, 18, shard.FeatureLabels, false},
	{"PROTEINS", "tu/PROTEINS", 1113, 43471, 81044, 2, 3, shard.FeatureLabels, false},
	{"ENZYMES", "tu/ENZYMES", 600, 19580, 37282, 6, 3, shard.FeatureLabels, false},
	{"NCI1", "tu/NCI1", 4110, 122747, 132753, 2, 37, shard.FeatureLabels, false},
	{"NCI109", "tu/NCI109", 4127, 122494, 132604, 2, 38, shard.FeatureLabels, false},
	{"IMDB-BINARY", "tu/IMDB-BINARY", 1000, 19773, 96531, 2, 65, shard.FeatureDegree, false},
	{"IMDB-MULTI", "tu/IMDB-MULTI", 1500, 19502, 98903, 3, 59, shard.FeatureDegree, false},
	{"AIDS", "tu/AIDS", 2000, 31385, 32390, 2, 38, shard.FeatureLabels, false},
	{"DD", "tu/DD/DD.zip", 1178, 334925, 843046, 2, 89, shard.FeatureLabels, true},
	{"REDDIT-BINARY", "tu/REDDIT-BINARY/REDDIT-BINARY.zip", 2000, 859254, 995508, 2, 566, shard.FeatureDegree, true},
	{"COLLAB", "tu/COLLAB/COLLAB_tu.tar.xz", 5000, 372474, 12286079, 3, 369, shard.FeatureDegree, true},
}

// TestRealDatasets converts every real dataset, checks the published counts,
// verifies the shards, and reads every graph back against the parser.
func TestRealDatasets(t *testing.T) {
	testutil.NoRace(t)
	for _, d := range realDatasets {
		t.Run(d.name, func(t *testing.T) {
			if d.heavy && testutil.RaceEnabled {
				t.Skip("large dataset: skipped under -race (make test runs it without -race)")
			}
			in := testutil.Shared(t, d.path)
			if filepath.Ext(in) == ".xz" {
				in = filepath.Join(testutil.UnpackTarXZ(t, in), d.name)
			}
			out := filepath.Join(t.TempDir(), d.name)
			m := convertTo(t, Options{Input: in, Out: out})
			if m.Stats.Graphs != d.graphs || m.Stats.Nodes != d.nodes || m.Stats.Edges != d.edges ||
				m.Classes != d.classes || m.Features.Dim != d.featureDim || m.Features.Kind != d.kind {
				t.Fatalf("%s: %d graphs, %d nodes, %d edges, %d classes, %s×%d; want %d, %d, %d, %d, %s×%d",
					d.name, m.Stats.Graphs, m.Stats.Nodes, m.Stats.Edges, m.Classes, m.Features.Kind, m.Features.Dim,
					d.graphs, d.nodes, d.edges, d.classes, d.kind, d.featureDim)
			}
			if _, errs := shard.Verify(context.Background(), out); len(errs) > 0 {
				t.Fatalf("verify: %v", errs)
			}
			roundTrip(t, in, out, m)
		})
	}
}

// roundTrip parses the TU files again and compares each graph with what
// the shard reader returns: edge set, label, features.
func roundTrip(t *testing.T, in, out string, m *shard.Manifest) {
	t.Helper()
	r := openChecked(t, out)
	src, err := tu.OpenSource(in, "")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ds, err := tu.Load(src, tu.FeaturesAuto)
	if err != nil {
		t.Fatal(err)
	}
	var deg []int32
	n := 0
	_, err = ds.Graphs(context.Background(), ingest.ReadOptions{}, func(want *shard.Graph) error {
		got, err := r.Graph(want.ID)
		if err != nil {
			return err
		}
		if m.Features.Kind == shard.FeatureDegree {
			deg = slices.Grow(deg[:0], int(want.NumNodes))[:want.NumNodes]
			clear(deg)
			for _, v := range want.Edges {
				deg[v]++
			}
			want.Codes = deg
			for i, d := range deg {
				c, ok := slices.BinarySearch(m.Features.Degrees, d)
				if !ok {
					t.Fatalf("graph %d: degree %d not in the vocabulary", want.ID, d)
				}
				deg[i] = int32(c)
			}
		}
		if !graphEqual(got, *want) {
			t.Fatalf("graph %d differs after the round trip:\n got %+v\nwant %+v", want.ID, got, *want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(n) != m.Stats.Graphs {
		t.Fatalf("compared %d graphs of %d", n, m.Stats.Graphs)
	}
}

// TestRealArchives converts the archives people have — the TU text in a
// .tar.xz, the GIN paper's text format in its .zip — and checks they give
// the same dataset as the TU folder: graphs, nodes, edges, classes, and
// for labelled datasets the GIN tags as the same one-hot node labels.
func TestRealArchives(t *testing.T) {
	testutil.NoRace(t)
	cases := []struct {
		name, folder string
		archives     []string
		labels       bool
		heavy        bool
	}{
		{"MUTAG", "tu/MUTAG", []string{"gin/MUTAG.zip"}, true, false},
		{"PROTEINS", "tu/PROTEINS", []string{"gin/PROTEINS.zip"}, true, false},
		{"IMDB-BINARY", "tu/IMDB-BINARY", []string{"gin/IMDBBINARY.zip"}, false, false},
		{"COLLAB", "tu/COLLAB/COLLAB_tu.tar.xz", []string{"tu/COLLAB/COLLAB_tu.tar.xz", "tu/COLLAB/COLLAB_gin.zip"}, false, true},
		{"REDDIT-BINARY", "tu/REDDIT-BINARY/REDDIT-BINARY.zip", []string{"tu/REDDIT-BINARY/REDDIT-BINARY_gin.zip"}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.heavy && testutil.RaceEnabled {
				t.Skip("large dataset: skipped under -race (make test runs it without -race)")
			}
			in := testutil.Shared(t, c.folder)
			if filepath.Ext(in) == ".xz" { // the folder, as `xz -dc | tar -x` gives it
				in = filepath.Join(testutil.UnpackTarXZ(t, in), c.name)
			}
			want := convertTo(t, Options{Input: in, Out: filepath.Join(t.TempDir(), "folder")})
			for _, a := range c.archives {
				got := convertTo(t, Options{Input: testutil.Shared(t, a), Out: filepath.Join(t.TempDir(), "archive")})
				if got.Stats.Graphs != want.Stats.Graphs || got.Stats.Nodes != want.Stats.Nodes ||
					got.Stats.Edges != want.Stats.Edges || got.Classes != want.Classes {
					t.Fatalf("%s: %d graphs, %d nodes, %d edges, %d classes; the folder gives %d, %d, %d, %d", a,
						got.Stats.Graphs, got.Stats.Nodes, got.Stats.Edges, got.Classes,
						want.Stats.Graphs, want.Stats.Nodes, want.Stats.Edges, want.Classes)
				}
				if got.Features.Kind != want.Features.Kind || (c.labels && got.Features.Dim != want.Features.Dim) {
					t.Fatalf("%s: features %s×%d, the folder gives %s×%d", a, got.Features.Kind, got.Features.Dim, want.Features.Kind, want.Features.Dim)
				}
				t.Logf("%s: %d graphs, %d nodes, %d edges, %d classes, %s×%d: as the folder", a,
					got.Stats.Graphs, got.Stats.Nodes, got.Stats.Edges, got.Classes, got.Features.Kind, got.Features.Dim)
			}
		})
	}
}
