package ogb_test

import (
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/shard"
)

// folder writes an OGB raw folder: files maps a raw file's name (without
// raw/ and .csv.gz) to its rows.
func folder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ogbg-test")
	for name, body := range files {
		p := filepath.Join(dir, "raw", name+".csv.gz")
		if strings.HasPrefix(name, "split/") {
			p = filepath.Join(dir, name+".csv.gz")
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		zw := gzip.NewWriter(f)
		zw.Write([]byte(body))
		zw.Close()
		f.Close()
	}
	return dir
}

func base() map[string]string {
	return map[string]string{
		"edge":          "0,1\n1,2\n0,1\n",
		"edge-feat":     "1,0\n2,1\n3,0\n",
		"node-feat":     "5,1\n6,0\n7,1\n8,0\n9,1\n",
		"num-node-list": "3\n2\n",
		"num-edge-list": "2\n1\n",
		"graph-label":   "1,0\n,1\n",
		"split/s/train": "0\n",
		"split/s/valid": "1\n",
		"split/s/test":  "",
	}
}

func run(t *testing.T, files map[string]string) (*shard.Manifest, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "shards")
	res, err := convert.Run(context.Background(), convert.Options{Input: folder(t, files), Out: out})
	if err != nil {
		if _, serr := os.Stat(out); serr == nil {
			t.Fatalf("a failed conversion left %s", out)
		}
		return nil, err
	}
	return res.Manifest, nil
}

// The guesses made from the first rows are corrected by a reread: an
// integer column with a float further on is a float block, a code past
// 255 widens the column, a target other than 0 and 1 makes the task a
// regression; a single integer label with other values is a class.
func TestGuessesCorrected(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(map[string]string)
		check func(*shard.Manifest) bool
	}{
		{"categorical, binary", func(map[string]string) {}, func(m *shard.Manifest) bool {
			return m.NodeFeatures.Cols() == 2 && m.NodeFeatures.Categorical[0].Vocab == 10 && m.NodeFeatures.Width == 1 &&
				m.EdgeFeatures.Cols() == 2 && m.Task.Kind == shard.TaskBinary && m.Task.Targets == 2 && m.Task.Missing == 1
		}},
		{"float later", func(f map[string]string) { f["node-feat"] = "5,1\n6,0\n7,1\n8,0.5\n9,1\n" }, func(m *shard.Manifest) bool {
			return m.NodeFeatures.Cols() == 0 && m.NodeFeatures.Dense == 2
		}},
		{"wide code later", func(f map[string]string) { f["edge-feat"] = "1,0\n2,1\n300,0\n" }, func(m *shard.Manifest) bool {
			return m.EdgeFeatures.Width == 2 && m.EdgeFeatures.Categorical[0].Vocab == 301
		}},
		{"regression later", func(f map[string]string) { f["graph-label"] = "1,0\n,2.5\n" }, func(m *shard.Manifest) bool {
			return m.Task.Kind == shard.TaskRegression
		}},
		{"classes", func(f map[string]string) { f["graph-label"] = "4\n7\n" }, func(m *shard.Manifest) bool {
			return m.Task.Kind == shard.TaskClass && m.Classes == 2 && m.LabelMap[1] == "7"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := base()
			c.edit(f)
			m, err := run(t, f)
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(m) {
				t.Fatalf("manifest: node %+v edge %+v task %+v classes %d", m.NodeFeatures, m.EdgeFeatures, m.Task, m.Classes)
			}
		})
	}
}

// Every bad input is an ingest.ErrFormat naming the file, line and field.
func TestBadInput(t *testing.T) {
	cases := []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"ragged", func(f map[string]string) { f["node-feat"] = "5,1\n6\n7,1\n8,0\n9,1\n" }, "raw/node-feat.csv.gz:2: 1 fields, the file's first row has 2"},
		{"edge outside", func(f map[string]string) { f["edge"] = "0,1\n1,3\n0,1\n" }, "raw/edge.csv.gz:2: edge (1, 3) is not in graph 0's nodes 0..2"},
		{"negative code", func(f map[string]string) { f["edge-feat"] = "1,0\n-2,1\n3,0\n" }, "raw/edge-feat.csv.gz:2: field 1: negative code"},
		{"too few edges", func(f map[string]string) { f["num-edge-list"] = "2\n2\n" }, "raw/edge.csv.gz:3: ends after 3 rows; the count lists say 4 edges"},
		{"too many nodes", func(f map[string]string) { f["node-feat"] += "1,1\n" }, "raw/node-feat.csv.gz:6: more rows than the 5 nodes"},
		{"label rows", func(f map[string]string) { f["graph-label"] = "1,0\n" }, "raw/graph-label.csv.gz:1: ends after 1 rows; the count lists say 2 graphs"},
		{"not a number", func(f map[string]string) { f["graph-label"] = "1,0\n1,abc\n" }, `raw/graph-label.csv.gz:2: field 2: "abc" is not a number`},
		{"counts differ", func(f map[string]string) { f["num-edge-list"] = "2\n1\n0\n" }, "3 graphs, raw/num-node-list.csv.gz has 2"},
		{"split range", func(f map[string]string) { f["split/s/test"] = "5\n" }, "raw/../split/s/test.csv.gz:1: field 1: graph 5 out of range 0..1"},
		{"split overlap", func(f map[string]string) { f["split/s/test"] = "0\n" }, `split "s": 1 ids are in both the training and the test set`},
		// Found from outside: each converted to other data, or failed
		// naming no file.
		{"infinite target", func(f map[string]string) { f["graph-label"] = "1,0\n,inf\n" }, `raw/graph-label.csv.gz:2: field 2: "inf" is not a finite number`},
		{"empty label file", func(f map[string]string) { f["graph-label"] = "" }, "raw/graph-label.csv.gz: ends after 0 rows; the count lists say 2 graphs"},
		{"float node id", func(f map[string]string) { f["edge"] = "0,1\n1,2.5\n0,1\n" }, "raw/edge.csv.gz:2: edge (1, 2.5): node ids are integers"},
		{"labels past 2^53", func(f map[string]string) { f["graph-label"] = "9007199254740993\n9007199254740992\n" },
			"raw/graph-label.csv.gz:1: field 1: integer 9007199254740993 is beyond ±2^53, what a float64 holds exactly"},
		{"conflicting listing", func(f map[string]string) {
			f["edge"] = "0,1\n1,0\n1,2\n"
			f["edge-feat"] = "1,0\n2,0\n3,0\n"
			f["num-edge-list"] = "3\n0\n"
		}, "raw/edge-feat.csv.gz:2: graph 0: edge (0, 1) has other features than on line 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := base()
			c.edit(f)
			_, err := run(t, f)
			if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(c.want, "raw/../")) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if !strings.Contains(c.want, "split \"s\"") && !errors.Is(err, ingest.ErrFormat) {
				t.Fatalf("%v is not an ingest.ErrFormat", err)
			}
		})
	}
}

// A bond listed both ways with the same features is one undirected edge
// with them; the split is a split file with a valid set.
func TestBothDirectionsAndSplit(t *testing.T) {
	f := base()
	f["edge"] = "0,1\n1,0\n1,2\n0,1\n"
	f["edge-feat"] = "4,1\n4,1\n2,0\n3,0\n"
	f["num-edge-list"] = "3\n1\n"
	m, err := run(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if m.Stats.Edges != 3 || m.Stats.DirectedEntries != 4 {
		t.Fatalf("stats %+v", m.Stats)
	}
}
