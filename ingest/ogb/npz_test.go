package ogb_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

// npy is one array as numpy.save writes it: descr ("<i8", "<f4", ...),
// shape, values in C order.
type npy struct {
	descr   string
	shape   []int
	vals    []float64
	fortran bool // vals stored column-major
}

func (a npy) bytes() []byte {
	order := a.fortran
	vals := a.vals
	if a.fortran {
		r, c := a.shape[0], a.shape[1]
		vals = make([]float64, len(a.vals))
		for i := range r {
			for j := range c {
				vals[j*r+i] = a.vals[i*c+j]
			}
		}
	}
	var b bytes.Buffer
	bo := binary.ByteOrder(binary.LittleEndian)
	if a.descr[0] == '>' {
		bo = binary.BigEndian
	}
	for _, v := range vals {
		switch a.descr[1:] {
		case "i8":
			binary.Write(&b, bo, int64(v))
		case "i4":
			binary.Write(&b, bo, int32(v))
		case "u1":
			b.WriteByte(byte(v))
		case "f4":
			binary.Write(&b, bo, float32(v))
		case "f8":
			binary.Write(&b, bo, v)
		}
	}
	return testutil.Npy(a.descr, a.shape, order, b.Bytes())
}

// writeNpz writes arrays (name → array) as a compressed .npz, as
// numpy.savez_compressed does.
func writeNpz(t *testing.T, p string, arrays map[string]npy) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, a := range arrays {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(a.bytes())
	}
	zw.Close()
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// baseNpz is base()'s dataset in DatasetSaver's layout.
func baseNpz() (data map[string]npy, labels npy) {
	return map[string]npy{
			"num_nodes_list": {"<i8", []int{2}, []float64{3, 2}, false},
			"num_edges_list": {"<i8", []int{2}, []float64{2, 1}, false},
			"edge_index":     {"<i8", []int{2, 3}, []float64{0, 1, 0, 1, 2, 1}, false},
			"edge_feat":      {"<i8", []int{3, 2}, []float64{1, 0, 2, 1, 3, 0}, false},
			"node_feat":      {"<i8", []int{5, 2}, []float64{5, 1, 6, 0, 7, 1, 8, 0, 9, 1}, false},
		},
		npy{"<f8", []int{2, 2}, []float64{1, 0, math.NaN(), 1}, false}
}

func runNpz(t *testing.T, data map[string]npy, labels npy, split string) (string, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ogbg-npz")
	writeNpz(t, filepath.Join(dir, "raw", "data.npz"), data)
	writeNpz(t, filepath.Join(dir, "raw", "graph-label.npz"), map[string]npy{"graph_label": labels})
	if split != "" {
		body, err := os.ReadFile(filepath.Join("testdata", split))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "split", "s", "split_dict.pt")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, body, 0o644)
	}
	out := filepath.Join(t.TempDir(), "shards")
	_, err := convert.Run(context.Background(), convert.Options{Input: dir, Out: out})
	if err != nil {
		if _, serr := os.Stat(out); serr == nil {
			t.Fatalf("a failed conversion left %s", out)
		}
	}
	return out, err
}

func graphs(t *testing.T, dir string) []string {
	t.Helper()
	r, err := shard.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for i := range r.NumGraphs() {
		g, err := r.Graph(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%+v", g))
	}
	return out
}

// The npz layout gives the very graphs the csv.gz layout does, and the
// same manifest task and columns.
func TestNpzEqualsCsv(t *testing.T) {
	csvOut := filepath.Join(t.TempDir(), "csv")
	if _, err := convert.Run(context.Background(), convert.Options{Input: folder(t, base()), Out: csvOut}); err != nil {
		t.Fatal(err)
	}
	data, labels := baseNpz()
	npzOut, err := runNpz(t, data, labels, "")
	if err != nil {
		t.Fatal(err)
	}
	want, got := graphs(t, csvOut), graphs(t, npzOut)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Fatalf("npz graphs\n%s\ncsv graphs\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mc, _ := shard.ReadManifest(csvOut)
	mn, _ := shard.ReadManifest(npzOut)
	if fmt.Sprint(mc.Task, mc.NodeFeatures, mc.EdgeFeatures) != fmt.Sprint(mn.Task, mn.NodeFeatures, mn.EdgeFeatures) {
		t.Fatalf("manifests differ: %v %v %v vs %v %v %v", mc.Task, mc.NodeFeatures, mc.EdgeFeatures, mn.Task, mn.NodeFeatures, mn.EdgeFeatures)
	}
}

// Column-major arrays (smiles2graph's edge_index is a transpose, and
// DatasetSaver keeps it so) give the same graphs.
func TestNpzFortranOrder(t *testing.T) {
	data, labels := baseNpz()
	want := convertNpz(t, data, labels)
	for _, arr := range []string{"edge_index", "node_feat", "edge_feat"} {
		a := data[arr]
		a.fortran = true
		data[arr] = a
	}
	labels.fortran = true
	if got := convertNpz(t, data, labels); got != want {
		t.Fatalf("Fortran order\n%s\nC order\n%s", got, want)
	}
}

func convertNpz(t *testing.T, data map[string]npy, labels npy) string {
	t.Helper()
	out, err := runNpz(t, data, labels, "")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(graphs(t, out), "\n")
}

// Float features are a float block; a uint8 array holding 255 is stored
// two bytes a code, since the width holds the vocabulary size (256, the
// edge fill's reserved code) too (docs/format.md, "Version 3").
func TestNpzKinds(t *testing.T) {
	data, labels := baseNpz()
	data["node_feat"] = npy{"<f4", []int{5, 2}, []float64{5, 1, 6, 0, 7, 1, 8, 0.5, 9, 1}, false}
	data["edge_feat"] = npy{"|u1", []int{3, 2}, []float64{1, 0, 2, 1, 255, 0}, false}
	out, err := runNpz(t, data, labels, "")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := shard.ReadManifest(out)
	if m.NodeFeatures.Dense != 2 || m.EdgeFeatures.Width != 2 || m.EdgeFeatures.Categorical[0].Vocab != 256 {
		t.Fatalf("node %+v edge %+v", m.NodeFeatures, m.EdgeFeatures)
	}
}

// The torch.save'd split dicts under testdata (NumPy arrays, tensors,
// lists) become split files.
func TestNpzSplitDict(t *testing.T) {
	data, labels := baseNpz()
	// 301 graphs of one node each, so the split's id 300 exists.
	n := 301
	ones := make([]float64, n)
	zeros := make([]float64, n)
	lab := make([]float64, n)
	for i := range ones {
		ones[i] = 1
		lab[i] = float64(i % 2)
	}
	data = map[string]npy{
		"num_nodes_list": {"<i8", []int{n}, ones, false},
		"num_edges_list": {"<i8", []int{n}, zeros, false},
		"edge_index":     {"<i8", []int{2, 0}, nil, false},
	}
	labels = npy{"<i8", []int{n}, lab, false}
	for _, f := range []string{"split_numpy.pt", "split_tensor.pt", "split_list.pt"} {
		t.Run(f, func(t *testing.T) {
			out, err := runNpz(t, data, labels, f)
			if err != nil {
				t.Fatal(err)
			}
			body, err := os.ReadFile(filepath.Join(out, "split-s.json"))
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"training":[0,1,2,300],"valid":[4],"test":[5,6]}`; strings.TrimSpace(string(body)) != want {
				t.Fatalf("split-s.json %s, want %s", body, want)
			}
		})
	}
	_, err := runNpz(t, data, labels, "split_float.pt")
	if err == nil || !strings.Contains(err.Error(), `split/s/split_dict.pt: "train": ids of type "f8", not integers`) {
		t.Fatalf("float ids: %v", err)
	}
}

// Every bad npz input is an ingest.ErrFormat naming the file, the array,
// its row and field.
func TestNpzBadInput(t *testing.T) {
	cases := []struct {
		name string
		edit func(map[string]npy, *npy)
		want string
	}{
		{"edge outside", func(d map[string]npy, _ *npy) {
			d["edge_index"] = npy{"<i8", []int{2, 3}, []float64{0, 1, 0, 1, 3, 1}, false}
		}, "raw/data.npz/edge_index.npy:2: edge (1, 3) is not in graph 0's nodes 0..2"},
		{"edge_index shape", func(d map[string]npy, _ *npy) {
			d["edge_index"] = npy{"<i8", []int{3, 2}, []float64{0, 1, 0, 1, 2, 1}, false}
		}, "raw/data.npz/edge_index.npy: shape (3, 2), want (2, E)"},
		{"counts do not add up", func(d map[string]npy, _ *npy) {
			d["num_nodes_list"] = npy{"<i8", []int{2}, []float64{3, 3}, false}
		}, "raw/data.npz/node_feat.npy:5: ends after 5 rows; the count lists say 6 nodes"},
		{"label rows", func(_ map[string]npy, l *npy) {
			*l = npy{"<f8", []int{3, 2}, []float64{1, 0, 0, 1, 1, 1}, false}
		}, "raw/graph-label.npz/graph_label.npy:3: more rows than the 2 graphs"},
		{"negative code", func(d map[string]npy, _ *npy) {
			d["edge_feat"] = npy{"<i8", []int{3, 2}, []float64{1, 0, 2, -1, 3, 0}, false}
		}, "raw/data.npz/edge_feat.npy:2: field 2: negative code"},
		{"nan feature", func(d map[string]npy, _ *npy) {
			d["node_feat"] = npy{"<f8", []int{5, 2}, []float64{5, 1, 6, 0, 7, math.NaN(), 8, 0, 9, 1}, false}
		}, "raw/data.npz/node_feat.npy:3: field 2: nan in a feature column"},
		{"big-endian", func(d map[string]npy, _ *npy) {
			d["node_feat"] = npy{">i8", []int{5, 2}, []float64{5, 1, 6, 0, 7, 1, 8, 0, 9, 1}, false}
		}, "raw/data.npz/node_feat.npy: .npy header: element type \">i8\" is big-endian"},
		{"missing array", func(d map[string]npy, _ *npy) { delete(d, "num_edges_list") }, "raw/data.npz: no num_edges_list array"},
		{"counts differ", func(d map[string]npy, _ *npy) {
			d["num_edges_list"] = npy{"<i8", []int{3}, []float64{2, 1, 0}, false}
		}, "raw/data.npz/num_edges_list.npy: 3 graphs, raw/data.npz/num_nodes_list.npy has 2"},
		{"labels past 2^53", func(_ map[string]npy, l *npy) {
			*l = npy{"<i8", []int{2}, []float64{1 << 53, 1<<53 + 1}, false}
		}, "raw/graph-label.npz/graph_label.npy:1: field 1: integer 9007199254740992 is beyond ±2^53"},
		{"infinite target", func(_ map[string]npy, l *npy) {
			*l = npy{"<f8", []int{2, 2}, []float64{1, 0, math.Inf(1), 1}, false}
		}, "raw/graph-label.npz/graph_label.npy:2: field 1: +Inf is not a finite number"},
		{"short array", func(d map[string]npy, _ *npy) {
			a := d["node_feat"]
			a.vals = a.vals[:7]
			d["node_feat"] = a
		}, "raw/data.npz/node_feat.npy: the array ends before its shape says"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, labels := baseNpz()
			c.edit(data, &labels)
			_, err := runNpz(t, data, labels, "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if !errors.Is(err, ingest.ErrFormat) {
				t.Fatalf("%v is not an ingest.ErrFormat", err)
			}
		})
	}
}
