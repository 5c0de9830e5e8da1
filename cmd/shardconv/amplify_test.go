package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/augloader/augloader/internal/testkit/testutil"
)

// Kilobytes that claim gigabytes: each input below is a few kilobytes on
// disk that a converter trusting its counts, its compression or its
// encodings turned into gigabytes (or a fatal out-of-memory). Each is now
// refused naming the file and field, or converted, and the converter's
// peak RSS stays under convertBound (docs/format.md, "Limits").

// convertBound is the converter's documented bound for these inputs: its
// constant (the runtime, read-ahead buffers, the writer's compressors)
// and the largest graph's real content, a few megabytes here.
const convertBound = 192 << 20

var (
	npy  = testutil.Npy
	i64s = testutil.Int64s
)

// zipOf writes entries (name → bytes, or a func streaming them) deflated.
func zipOf(t *testing.T, p string, entries map[string]any) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	for name, body := range entries {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		switch b := body.(type) {
		case []byte:
			w.Write(b)
		case func(io.Writer):
			b(w)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

// zeros streams n zero bytes.
func zeros(n int64) func(io.Writer) {
	return func(w io.Writer) { io.CopyN(w, zeroReader{}, n) }
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// smallNpz is a two-graph DatasetSaver folder; extra arrays are added to
// (or replace) its data.npz.
func smallNpz(t *testing.T, extra map[string]any) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ogbg")
	data := map[string]any{
		"num_nodes_list.npy": npy("<i8", []int{2}, false, i64s(3, 2)),
		"num_edges_list.npy": npy("<i8", []int{2}, false, i64s(2, 1)),
		"edge_index.npy":     npy("<i8", []int{2, 3}, false, i64s(0, 1, 0, 1, 2, 1)),
	}
	for k, v := range extra {
		data[k] = v
	}
	zipOf(t, filepath.Join(dir, "raw", "data.npz"), data)
	zipOf(t, filepath.Join(dir, "raw", "graph-label.npz"), map[string]any{"graph_label.npy": npy("<i8", []int{2}, false, i64s(1, 0))})
	return dir
}

// splitDict writes split/s/split_dict.pt into dir from the torch.save'd
// testdata file, its pickle and storages edited by edit.
func splitDict(t *testing.T, dir string, edit func(name string, body []byte) any) {
	t.Helper()
	src := testutil.Root(t) + "/ingest/ogb/testdata/split_tensor.pt"
	zr, err := zip.OpenReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	entries := map[string]any{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		body, _ := io.ReadAll(rc)
		rc.Close()
		entries[f.Name] = edit(f.Name, body)
	}
	zipOf(t, filepath.Join(dir, "split", "s", "split_dict.pt"), entries)
}

// pickleFlood is a data.pkl of n bytes: PROTO, a MARK, then n-4 repeats
// of op (a value pushed, memoized or wrapped each byte), STOP.
func pickleFlood(op byte, n int64) func(io.Writer) {
	return func(w io.Writer) {
		w.Write([]byte{0x80, 0x02, 'N'})
		buf := bytes.Repeat([]byte{op}, 1<<16)
		for left := n - 4; left > 0; left -= int64(len(buf)) {
			w.Write(buf[:min(int64(len(buf)), left)])
		}
		w.Write([]byte{'.'})
	}
}

func gzipFile(t *testing.T, p string, fill func(io.Writer)) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	fill(zw)
	zw.Close()
	f.Close()
}

func text(s string) func(io.Writer) { return func(w io.Writer) { io.WriteString(w, s) } }

// ogbCsv is a one-graph csv.gz folder: n nodes, the edge file filled by
// edges listing m edges.
func ogbCsv(t *testing.T, n, m int64, edges func(io.Writer)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ogbg-csv")
	gzipFile(t, filepath.Join(dir, "raw", "edge.csv.gz"), edges)
	gzipFile(t, filepath.Join(dir, "raw", "num-node-list.csv.gz"), text(fmt.Sprintf("%d\n", n)))
	gzipFile(t, filepath.Join(dir, "raw", "num-edge-list.csv.gz"), text(fmt.Sprintf("%d\n", m)))
	gzipFile(t, filepath.Join(dir, "raw", "graph-label.csv.gz"), text("1\n"))
	return dir
}

// repeated writes line n times.
func repeated(line string, n int64) func(io.Writer) {
	return func(w io.Writer) {
		buf := []byte(strings.Repeat(line, 1<<14))
		per := int64(1 << 14)
		for left := n; left > 0; left -= per {
			w.Write(buf[:min(per, left)*int64(len(line))])
		}
	}
}

// parquetEdges writes a one-row Parquet table whose edge_index lists k
// edges (0, 1), dictionary-encoded (a few kilobytes for any k).
func parquetEdges(t *testing.T, k int, nodes int64) string {
	t.Helper()
	mem := memory.DefaultAllocator
	ll := arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int64))
	ei := array.NewListBuilder(mem, ll.Elem())
	ei.Append(true)
	inner := ei.ValueBuilder().(*array.ListBuilder)
	vals := inner.ValueBuilder().(*array.Int64Builder)
	for side := range 2 {
		inner.Append(true)
		vals.Reserve(k)
		for range k {
			vals.UnsafeAppend(int64(side))
		}
	}
	nn := array.NewInt64Builder(mem)
	nn.Append(nodes)
	y := array.NewInt64Builder(mem)
	y.Append(1)
	sc := arrow.NewSchema([]arrow.Field{{Name: "edge_index", Type: ll}, {Name: "num_nodes", Type: arrow.PrimitiveTypes.Int64}, {Name: "y", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := array.NewRecordBatch(sc, []arrow.Array{ei.NewArray(), nn.NewArray(), y.NewArray()}, 1)
	tbl := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
	p := filepath.Join(t.TempDir(), "bomb.parquet")
	f, _ := os.Create(p)
	if err := pqarrow.WriteTable(tbl, f, 1, nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	tbl.Release()
	rec.Release()
	return p
}

// convertRSS runs shardconv convert on in and returns its stderr, whether
// it succeeded, and its peak RSS. GNU time measures it: the rusage Go
// gives for a child counts the test process's own high-water mark, which
// the child shares until it execs.
func convertRSS(t *testing.T, in string, args ...string) (string, bool, int64) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("/usr/bin/time (GNU time) is missing: .ci/run installs it")
		}
		t.Skip("needs /usr/bin/time (GNU time) to measure the converter's peak RSS")
	}
	rssFile := filepath.Join(t.TempDir(), "rss")
	cmd := exec.Command("/usr/bin/time", append([]string{"-q", "-f", "%M", "-o", rssFile, bin, "convert", "-q", "-i", in, "-o", filepath.Join(t.TempDir(), "out.shards")}, args...)...)
	var e strings.Builder
	cmd.Stderr = &e
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	b, rerr := os.ReadFile(rssFile)
	var kib int64
	if _, serr := fmt.Sscan(lastLine(string(b)), &kib); rerr != nil || serr != nil {
		t.Fatalf("GNU time wrote %q: %v %v", b, rerr, serr)
	}
	return e.String(), err == nil, kib << 10
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func inputBytes(t *testing.T, in string) int64 {
	var n int64
	filepath.Walk(in, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func TestAmplifiersBounded(t *testing.T) {
	testutil.NoRace(t) // peak RSS of a subprocess; the -race run would only repeat it slower
	cases := []struct {
		name  string
		input func(t *testing.T) string
		args  []string
		want  string // in the error; "" must convert
	}{
		{"pickle stack flood", func(t *testing.T) string {
			dir := smallNpz(t, nil)
			splitDict(t, dir, func(name string, b []byte) any {
				if strings.HasSuffix(name, "data.pkl") {
					return pickleFlood('N', 64<<20)
				}
				return b
			})
			return dir
		}, nil, "split/s/split_dict.pt: split_tensor/data.pkl: a pickle of 67108864 bytes, more than a split of 2 graphs can need"},
		{"pickle memo flood (raised --max-pickle does not lift the graphs' bound)", func(t *testing.T) string {
			dir := smallNpz(t, nil)
			splitDict(t, dir, func(name string, b []byte) any {
				if strings.HasSuffix(name, "data.pkl") {
					return pickleFlood(0x94, 64<<20)
				}
				return b
			})
			return dir
		}, []string{"--max-pickle", "16GiB"}, "more than a split of 2 graphs can need"},
		{"torch ByteStorage widened", func(t *testing.T) string {
			dir := smallNpz(t, nil)
			splitDict(t, dir, func(name string, b []byte) any {
				switch {
				case strings.HasSuffix(name, "data.pkl"):
					return bytes.Replace(b, []byte("LongStorage"), []byte("ByteStorage"), 1)
				case strings.HasSuffix(name, "data/0"):
					return zeros(256 << 20)
				}
				return b
			})
			return dir
		}, nil, "split/s/split_dict.pt: \"train\": storage split_tensor/data/0 holds 268435456 ids, more than the dataset's 2 graphs"},
		{"u1 feature array widened (deflated zeros)", func(t *testing.T) string {
			return smallNpz(t, map[string]any{"node_feat.npy": func(w io.Writer) {
				w.Write(npy("|u1", []int{5, 64 << 20}, false, nil))
				zeros(5 * 64 << 20)(w)
			}})
		}, nil, "raw/data.npz/node_feat.npy: inflates to 335544448 bytes: with the rest, more than 100 times the input's"},
		{"u1 feature rows widened (deflated zeros)", func(t *testing.T) string {
			return smallNpz(t, map[string]any{
				"num_nodes_list.npy": npy("<i8", []int{2}, false, i64s(1<<22, 2)),
				"node_feat.npy": func(w io.Writer) {
					w.Write(npy("|u1", []int{1<<22 + 2, 64}, false, nil))
					zeros((1<<22 + 2) * 64)(w)
				}})
		}, nil, "more than 100 times the input's"},
		{"npz node count with no data behind it", func(t *testing.T) string {
			return smallNpz(t, map[string]any{"num_nodes_list.npy": npy("<i8", []int{2}, false, i64s(1<<28, 2))})
		}, nil, "raw/data.npz/num_nodes_list.npy:1: field 1: graph 0 declares 268435456 nodes, more than the limit of 16777216 (shardconv convert --max-graph-nodes raises it)"},
		{"npz node count at the limit, no data behind it", func(t *testing.T) string {
			return smallNpz(t, map[string]any{"num_nodes_list.npy": npy("<i8", []int{2}, false, i64s(1<<24, 2))})
		}, nil, ""},
		{"csv node count with no data behind it", func(t *testing.T) string {
			return ogbCsv(t, 1<<28, 1, text("0,1\n"))
		}, nil, "raw/num-node-list.csv.gz:1: field 1: graph 0 declares 268435456 nodes"},
		{"csv node count raised past the default, no data behind it", func(t *testing.T) string {
			return ogbCsv(t, 1<<28, 1, text("0,1\n"))
		}, []string{"--max-graph-nodes", "1073741824"}, ""},
		{"parquet node count with no data behind it", func(t *testing.T) string {
			return parquetEdges(t, 1, 1<<28)
		}, nil, "bomb.parquet:1: graph 0 declares 268435456 nodes"},
		{"repeated listings of one edge (past the expansion bound)", func(t *testing.T) string {
			return ogbCsv(t, 2, 40<<20, repeated("0,1\n", 40<<20))
		}, nil, "raw/edge.csv.gz: inflates to"},
		{"repeated listings of one edge (within it)", func(t *testing.T) string {
			return ogbCsv(t, 2, 3<<19, repeated("0,1\n", 3<<19))
		}, nil, ""},
		{"Fortran-order feature columns", func(t *testing.T) string {
			return smallNpz(t, map[string]any{"node_feat.npy": npy("|u1", []int{5, 4096}, true, make([]byte, 5*4096))})
		}, nil, ""},
		{"Fortran-order feature columns past the limit", func(t *testing.T) string {
			return smallNpz(t, map[string]any{"node_feat.npy": npy("|u1", []int{5, 40000}, true, make([]byte, 5*40000))})
		}, nil, "raw/data.npz/node_feat.npy: 40000 feature columns, more than the limit of 4096 (shardconv convert --max-columns raises it)"},
		{"Parquet dictionary-encoded lists", func(t *testing.T) string {
			return parquetEdges(t, 8<<20, 2)
		}, nil, "bomb.parquet:1: decoding its values needs more than 67108864 bytes held at once"},
		{"an archive's member inflating to a gigabyte", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "bomb.tar.gz")
			f, _ := os.Create(p)
			zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
			tw := tar.NewWriter(zw)
			tw.WriteHeader(&tar.Header{Name: "BOMB/BOMB_A.txt", Size: 1 << 30, Mode: 0o644, Typeflag: tar.TypeReg})
			io.CopyN(tw, zeroReader{}, 1<<30)
			tw.Close()
			zw.Close()
			f.Close()
			return p
		}, nil, "bomb.tar.gz: inflates to"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.input(t)
			stderr, ok, rss := convertRSS(t, in, c.args...)
			t.Logf("%d KB input: peak RSS %d MiB; %s", inputBytes(t, in)>>10, rss>>20, strings.TrimSpace(stderr))
			switch {
			case c.want == "" && !ok:
				t.Fatalf("refused: %s", stderr)
			case c.want != "" && (ok || !strings.Contains(stderr, c.want)):
				t.Fatalf("exit ok=%v, %q; want %q", ok, stderr, c.want)
			}
			if rss > convertBound {
				t.Fatalf("peak RSS %d MiB over the bound of %d MiB", rss>>20, convertBound>>20)
			}
		})
	}
}
