package parquet_test

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/shard"
)

// graph is one row of the table.
type graph struct {
	edges    [2][]int64
	nodes    int64
	nodeFeat [][]int64
	edgeAttr [][]int64
	y        []float64 // NaN: null
}

// base is two graphs: (0,1), (1,2) on three nodes and (0,1) on two, with
// two categorical node and edge columns and two binary targets, one
// missing.
func base() []graph {
	return []graph{
		{[2][]int64{{0, 1}, {1, 2}}, 3, [][]int64{{5, 1}, {6, 0}, {7, 1}}, [][]int64{{1, 0}, {2, 1}}, []float64{1, 0}},
		{[2][]int64{{0}, {1}}, 2, [][]int64{{8, 0}, {9, 1}}, [][]int64{{3, 0}}, []float64{math.NaN(), 1}},
	}
}

func matrixOf(b *array.ListBuilder, rows [][]int64) {
	b.Append(true)
	inner := b.ValueBuilder().(*array.ListBuilder)
	vals := inner.ValueBuilder().(*array.Int64Builder)
	for _, r := range rows {
		inner.Append(true)
		vals.AppendValues(r, nil)
	}
}

// write writes graphs as a Parquet file at p, rowGroup rows a group.
func write(t *testing.T, p string, gs []graph, rowGroup int64) {
	t.Helper()
	writeWithout(t, p, gs, rowGroup)
}

// writeWithout is write leaving out the columns named.
func writeWithout(t *testing.T, p string, gs []graph, rowGroup int64, omit ...string) {
	t.Helper()
	writeProps(t, p, gs, rowGroup, parquet.NewWriterProperties(), omit...)
}

// writeProps is writeWithout with the writer's properties (compression).
func writeProps(t *testing.T, p string, gs []graph, rowGroup int64, props *parquet.WriterProperties, omit ...string) {
	t.Helper()
	mem := memory.DefaultAllocator
	ll := arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int64))
	ei, nf, ea := array.NewListBuilder(mem, ll.Elem()), array.NewListBuilder(mem, ll.Elem()), array.NewListBuilder(mem, ll.Elem())
	y := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float64)
	nn := array.NewInt64Builder(mem)
	for _, g := range gs {
		matrixOf(ei, [][]int64{g.edges[0], g.edges[1]})
		matrixOf(nf, g.nodeFeat)
		matrixOf(ea, g.edgeAttr)
		nn.Append(g.nodes)
		y.Append(true)
		for _, v := range g.y {
			if math.IsNaN(v) {
				y.ValueBuilder().AppendNull()
			} else {
				y.ValueBuilder().(*array.Float64Builder).Append(v)
			}
		}
	}
	cols := []arrow.Array{ei.NewArray(), nf.NewArray(), ea.NewArray(), y.NewArray(), nn.NewArray()}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "edge_index", Type: ll, Nullable: true}, {Name: "node_feat", Type: ll, Nullable: true},
		{Name: "edge_attr", Type: ll, Nullable: true}, {Name: "y", Type: arrow.ListOf(arrow.PrimitiveTypes.Float64), Nullable: true},
		{Name: "num_nodes", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	for i := len(cols) - 1; i >= 0; i-- {
		if slices.Contains(omit, sc.Field(i).Name) {
			fields := slices.Delete(slices.Clone(sc.Fields()), i, i+1)
			cols = slices.Delete(cols, i, i+1)
			sc = arrow.NewSchema(fields, nil)
		}
	}
	rec := array.NewRecordBatch(sc, cols, int64(len(gs)))
	defer rec.Release()
	tbl := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
	defer tbl.Release()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pqarrow.WriteTable(tbl, f, rowGroup, props, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
}

func convertFile(t *testing.T, in string) (string, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "shards")
	_, err := convert.Run(context.Background(), convert.Options{Input: in, Out: out})
	if err != nil {
		if _, serr := os.Stat(out); serr == nil {
			t.Fatalf("a failed conversion left %s", out)
		}
	}
	return out, err
}

func graphs(t *testing.T, dir string) string {
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
	return strings.Join(out, "\n")
}

// The table's graphs, read a record batch at a time across row groups,
// are stored exactly: categorical columns, undirected edges with their
// features, targets with NaN.
func TestGraphs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "toy.parquet")
	gs := base()
	write(t, p, gs, 1)
	out, err := convertFile(t, p)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := shard.ReadManifest(out)
	if m.Task.Kind != shard.TaskBinary || m.Task.Targets != 2 || m.Task.Missing != 1 ||
		m.NodeFeatures.Cols() != 2 || m.NodeFeatures.Categorical[0].Vocab != 10 || m.EdgeFeatures.Cols() != 2 {
		t.Fatalf("manifest: task %+v node %+v edge %+v", m.Task, m.NodeFeatures, m.EdgeFeatures)
	}
	r, err := shard.Open(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	g, _ := r.Graph(0)
	if fmt.Sprint(g.Edges, g.NodeCat.U8, g.EdgeCat.U8, g.Targets) != "[0 1 1 2] [5 1 6 0 7 1] [1 0 2 1] [1 0]" {
		t.Fatalf("graph 0: %v %v %v %v", g.Edges, g.NodeCat.U8, g.EdgeCat.U8, g.Targets)
	}
	g, _ = r.Graph(1)
	if fmt.Sprint(g.Edges, g.EdgeCat.U8, g.Targets) != "[0 1] [3 0] [NaN 1]" {
		t.Fatalf("graph 1: %v %v %v", g.Edges, g.EdgeCat.U8, g.Targets)
	}
	// An edge listed both ways with the same features is one edge; a
	// code past 255 widens its column (a reread).
	gs[0].edges = [2][]int64{{0, 1, 1}, {1, 0, 2}}
	gs[0].edgeAttr = [][]int64{{1, 0}, {1, 0}, {300, 1}}
	write(t, p, gs, 64)
	if out, err = convertFile(t, p); err != nil {
		t.Fatal(err)
	}
	m, _ = shard.ReadManifest(out)
	if m.Stats.Edges != 3 || m.EdgeFeatures.Width != 2 || m.EdgeFeatures.Categorical[0].Vocab != 301 {
		t.Fatalf("stats %+v edge %+v", m.Stats, m.EdgeFeatures)
	}
}

// Files named train, validation and test are a split; graphs are numbered
// in file-name order.
func TestSplitFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hf", "data")
	os.MkdirAll(dir, 0o755)
	gs := base()
	write(t, filepath.Join(dir, "train-00000-of-00001.parquet"), append(gs, gs...), 64)
	write(t, filepath.Join(dir, "validation-00000-of-00001.parquet"), gs[:1], 64)
	write(t, filepath.Join(dir, "test-00000-of-00001.parquet"), gs[1:], 64)
	out, err := convertFile(t, filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := os.ReadFile(filepath.Join(out, "split-files.json"))
	if want := `{"training":[1,2,3,4],"valid":[5],"test":[0]}`; strings.TrimSpace(string(body)) != want {
		t.Fatalf("split %s, want %s", body, want)
	}
	if s := graphs(t, out); strings.Count(s, "\n") != 5 {
		t.Fatalf("graphs:\n%s", s)
	}
}

// Every bad table is an ingest.ErrFormat naming the file, the row (a
// graph) and the column.
func TestBadInput(t *testing.T) {
	cases := []struct {
		name string
		edit func([]graph)
		want string
	}{
		{"edge outside", func(g []graph) { g[1].edges = [2][]int64{{0}, {2}} }, "toy.parquet:2: edge_index: edge 0 (0, 2) is not in the graph's nodes 0..1"},
		{"sides differ", func(g []graph) { g[1].edges = [2][]int64{{0, 1}, {1}} }, "toy.parquet:2: edge_index: 2 sources and 1 targets"},
		{"ragged row", func(g []graph) { g[0].nodeFeat[1] = []int64{6} }, "toy.parquet:1: node_feat: row 1 has 1 fields, the first row of the column has 2"},
		{"rows for nodes", func(g []graph) { g[1].nodes = 3 }, "toy.parquet:2: node_feat: 2 rows, want 3"},
		{"edge rows", func(g []graph) { g[1].edgeAttr = nil }, "toy.parquet:2: edge_attr: 0 rows, want 1"},
		{"negative code", func(g []graph) { g[0].edgeAttr[1][0] = -4 }, "toy.parquet:1: edge_attr: row 1, field 1: code -4 out of range"},
		{"targets", func(g []graph) { g[1].y = []float64{1} }, "toy.parquet:2: y: 1 targets, the first row has 2"},
		{"infinite target", func(g []graph) { g[1].y = []float64{math.Inf(-1), 1} }, "toy.parquet:2: y: -Inf is not a finite number"},
		{"conflicting listings", func(g []graph) {
			g[0].edges = [2][]int64{{0, 1, 1}, {1, 0, 2}}
			g[0].edgeAttr = [][]int64{{1, 0}, {2, 0}, {2, 1}}
		}, "toy.parquet:1: edge_attr: edge (0, 1) has other features in edge_index column 1 than in column 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gs := base()
			c.edit(gs)
			p := filepath.Join(t.TempDir(), "toy.parquet")
			write(t, p, gs, 64)
			_, err := convertFile(t, p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if !errors.Is(err, ingest.ErrFormat) {
				t.Fatalf("%v is not an ingest.ErrFormat", err)
			}
		})
	}
	// A table without edge_index is named with its columns.
	p := filepath.Join(t.TempDir(), "other.parquet")
	mem := memory.DefaultAllocator
	b := array.NewInt64Builder(mem)
	b.Append(1)
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	tbl := array.NewTableFromRecords(sc, []arrow.RecordBatch{array.NewRecordBatch(sc, []arrow.Array{b.NewArray()}, 1)})
	f, _ := os.Create(p)
	pqarrow.WriteTable(tbl, f, 64, nil, pqarrow.DefaultWriterProps())
	f.Close()
	if _, err := convertFile(t, p); err == nil || !strings.Contains(err.Error(), "other.parquet: no edge_index column (the columns are a)") {
		t.Fatalf("got %v", err)
	}
}

// Files of one dataset that disagree on a feature column (train with
// node_feat, test without; either order; in a folder or a zip) are
// refused naming both, never a panic (a nil column was dereferenced, the
// process died and left its temporary folder).
func TestFilesDisagreeOnColumns(t *testing.T) {
	for _, col := range []string{"node_feat", "edge_attr"} {
		for _, lacking := range []string{"train", "test"} {
			t.Run(col+"/"+lacking+" lacks it", func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "hf")
				os.MkdirAll(dir, 0o755)
				for _, name := range []string{"train", "test"} {
					var omit []string
					if name == lacking {
						omit = []string{col}
					}
					writeWithout(t, filepath.Join(dir, name+".parquet"), base(), 64, omit...)
				}
				want := lacking + ".parquet: no " + col + " column, where "
				_, err := convertFile(t, dir)
				if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ingest.ErrFormat) {
					t.Fatalf("folder: got %v, want %q", err, want)
				}
				zp := filepath.Join(t.TempDir(), "hf.zip")
				zipFolder(t, dir, zp)
				_, err = convertFile(t, zp)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("zip: got %v, want %q", err, want)
				}
				ents, _ := os.ReadDir(filepath.Dir(zp))
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), ".") {
						t.Fatalf("a refused conversion left %s", e.Name())
					}
				}
			})
		}
	}
}

// zipFolder zips dir's files into p.
func zipFolder(t *testing.T, dir, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		w, _ := zw.Create(e.Name())
		w.Write(b)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

// A legitimate table whose values are within the expansion bound, but
// whose decoder works with more than that (issue #44: 1,017 molecules
// with hundreds of mostly-missing targets each, 60 KB on disk, were
// refused as a decompression bomb): the bound counts the values the table
// decodes to, not the decoder's level buffers and growth slack.
func TestWideSparseTargetsAreNoBomb(t *testing.T) {
	const n, tasks = 1017, 300
	gs := make([]graph, n)
	for i := range gs {
		nodes := int64(12 + i%9)
		g := graph{nodes: nodes, y: make([]float64, tasks)}
		for v := range nodes - 1 {
			g.edges[0] = append(g.edges[0], v)
			g.edges[1] = append(g.edges[1], v+1)
			g.edgeAttr = append(g.edgeAttr, []int64{int64(v % 3), 0, 1})
		}
		for v := range nodes {
			g.nodeFeat = append(g.nodeFeat, []int64{int64(v % 7), 0, int64(v % 2), 5, 0, 0, 1, 0, 0})
		}
		for k := range g.y {
			g.y[k] = math.NaN()
		}
		g.y[i%tasks], g.y[(7*i)%tasks] = float64(i%2), 1
		gs[i] = g
	}
	p := filepath.Join(t.TempDir(), "wide.parquet")
	// Compressed as augloader.write_shards writes it (and as pyarrow does
	// by default): 100 times its size is less than the decoder holds.
	writeProps(t, p, gs, 4096, parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd)))
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := convertFile(t, p)
	if err != nil {
		t.Fatalf("a %d-byte table of %d graphs × %d targets refused: %v", st.Size(), n, tasks, err)
	}
	r, err := shard.Open(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumGraphs() != n {
		t.Fatalf("%d graphs stored, want %d", r.NumGraphs(), n)
	}
}
