package convert_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

type file struct {
	name string
	data []byte
	link bool // a symlink entry (tar)
}

func folderFiles(t *testing.T, dir, prefix string) []file {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []file
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out = append(out, file{name: prefix + e.Name(), data: b})
	}
	return out
}

func writeTar(t *testing.T, w io.Writer, files []file) {
	t.Helper()
	tw := tar.NewWriter(w)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if f.link {
			h = &tar.Header{Name: f.name, Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink, ModTime: time.Unix(0, 0)}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if !f.link {
			tw.Write(f.data)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// archive writes files as kind (tar, tar.gz, tar.xz, zip) and returns its path.
func archive(t *testing.T, kind string, files []file) string {
	t.Helper()
	var buf bytes.Buffer
	switch kind {
	case "tar":
		writeTar(t, &buf, files)
	case "tar.gz":
		zw := gzip.NewWriter(&buf)
		writeTar(t, zw, files)
		zw.Close()
	case "tar.xz":
		xw, err := xz.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		writeTar(t, xw, files)
		xw.Close()
	case "zip":
		zw := zip.NewWriter(&buf)
		for _, f := range files {
			w, err := zw.Create(f.name)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(f.data)
		}
		zw.Close()
	}
	// The name says nothing: layouts are recognised by content.
	p := filepath.Join(t.TempDir(), "input.bin")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type loaded struct {
	ds     ingest.Meta
	labels []int32
	graphs []shard.Graph
}

func load(t *testing.T, p string, spool string) loaded {
	t.Helper()
	ds, files, err := convert.Open(p, convert.OpenOptions{SpoolDir: spool})
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	defer files.Close()
	defer ds.Close()
	out := loaded{ds: ds.Meta()}
	if _, err := ds.Graphs(context.Background(), ingest.ReadOptions{}, func(g *shard.Graph) error {
		c := *g
		c.Edges = append([]int32(nil), g.Edges...)
		c.Codes = append([]int32(nil), g.Codes...)
		c.EdgeLabels = nil
		out.graphs = append(out.graphs, c)
		out.labels = append(out.labels, g.Label)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameGraphs(t *testing.T, name string, got, want loaded) {
	t.Helper()
	if got.ds.Graphs != want.ds.Graphs || got.ds.Nodes != want.ds.Nodes ||
		got.ds.FeatureKind != want.ds.FeatureKind || got.ds.FeatureDim != want.ds.FeatureDim ||
		fmt.Sprint(got.labels) != fmt.Sprint(want.labels) {
		t.Fatalf("%s: %d graphs, %d nodes, %s×%d, labels %v; want %d, %d, %s×%d, %v", name,
			got.ds.Graphs, got.ds.Nodes, got.ds.FeatureKind, got.ds.FeatureDim, got.labels,
			want.ds.Graphs, want.ds.Nodes, want.ds.FeatureKind, want.ds.FeatureDim, want.labels)
	}
	for i := range want.graphs {
		if fmt.Sprint(got.graphs[i]) != fmt.Sprint(want.graphs[i]) {
			t.Fatalf("%s: graph %d is %+v, want %+v", name, i, got.graphs[i], want.graphs[i])
		}
	}
}

// Every layout people have gives the same dataset as the TU folder: the
// TU text in a tar (plain, gzip, xz) or zip, and the GIN text format as a
// folder, a bare .txt, a zip (with GIN's fold files and macOS junk beside
// it) or a tar; a tar's spool is gone after Close.
func TestLayouts(t *testing.T) {
	tinyDir := testutil.Testdata(t, "tu", "TINY")
	ginDir := testutil.Testdata(t, "gin", "TINY")
	want := load(t, tinyDir, "")
	tuFiles := folderFiles(t, tinyDir, "TINY/")
	ginFiles := append(folderFiles(t, ginDir, "TINY/"),
		file{name: "TINY/10fold_idx/test_idx-1.txt", data: []byte("0\n")},
		file{name: "__MACOSX/TINY/._TINY.txt", data: []byte("junk")},
		file{name: "TINY/.DS_Store", data: []byte("junk")})
	spool := t.TempDir()
	cases := map[string]string{
		"tu tar":     archive(t, "tar", tuFiles),
		"tu tar.gz":  archive(t, "tar.gz", tuFiles),
		"tu tar.xz":  archive(t, "tar.xz", tuFiles),
		"tu zip":     archive(t, "zip", tuFiles),
		"gin folder": ginDir,
		"gin txt":    filepath.Join(ginDir, "TINY.txt"),
		"gin zip":    archive(t, "zip", ginFiles),
		"gin tar.gz": archive(t, "tar.gz", ginFiles),
	}
	for name, p := range cases {
		sameGraphs(t, name, load(t, p, spool), want)
	}
	if ents, _ := os.ReadDir(spool); len(ents) != 0 {
		t.Fatalf("spool left behind: %v", ents)
	}
}

// What cannot be read right is refused with an error saying why: a name
// twice in a zip or a tar, a symlink standing for a dataset file (never
// followed), a FIFO (refused at once, not waited on), anything else.
func TestLayoutRefusals(t *testing.T) {
	tinyDir := testutil.Testdata(t, "tu", "TINY")
	tuFiles := folderFiles(t, tinyDir, "TINY/")
	dupZip := archive(t, "zip", append(tuFiles, file{name: "TINY/TINY_graph_labels.txt", data: []byte("1\n1\n1\n")}))
	dupTar := archive(t, "tar", append(tuFiles, file{name: "other/TINY_graph_labels.txt", data: []byte("1\n1\n1\n")}))
	var noLabels []file
	for _, f := range tuFiles {
		if !strings.HasSuffix(f.name, "_graph_labels.txt") {
			noLabels = append(noLabels, f)
		}
	}
	linkTar := archive(t, "tar", append(noLabels, file{name: "TINY/TINY_graph_labels.txt", link: true}))
	junk := filepath.Join(t.TempDir(), "junk.bin")
	os.WriteFile(junk, []byte("\x00\x01 not a dataset"), 0o644)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ path, want string }{
		"zip entry twice":    {dupZip, "twice"},
		"tar name twice":     {dupTar, "refusing to guess"},
		"symlink in a tar":   {linkTar, "TINY_graph_labels.txt: missing required file"},
		"not a dataset":      {junk, "looked for"},
		"fifo":               {fifo, "not a regular file"},
		"missing input file": {filepath.Join(t.TempDir(), "nothing.zip"), "no such file"},
	} {
		done := make(chan error, 1)
		go func() {
			ds, files, err := convert.Open(c.path, convert.OpenOptions{SpoolDir: t.TempDir()})
			if err == nil {
				ds.Close()
				files.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
			}
			var fe *ingest.FormatError
			if c.want != "no such file" && !errors.As(err, &fe) {
				t.Errorf("%s: %v is not an *ingest.FormatError", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still blocked after 5 s", name)
		}
	}
}

// parseAll reads every graph of whatever p opens as, and checks each is
// canonical.
func parseAll(t *testing.T, p, spool string) {
	ds, files, err := convert.Open(p, convert.OpenOptions{SpoolDir: spool})
	if err != nil {
		return
	}
	defer files.Close()
	defer ds.Close()
	for _, buffered := range []bool{false, true} {
		_, err := ds.Graphs(context.Background(), ingest.ReadOptions{Buffered: buffered}, func(g *shard.Graph) error {
			for k := 0; k < len(g.Edges); k += 2 {
				if u, v := g.Edges[k], g.Edges[k+1]; u < 0 || u >= v || v >= g.NumNodes {
					t.Fatalf("graph %d: edge (%d, %d) not canonical for %d nodes", g.ID, u, v, g.NumNodes)
				}
			}
			return nil
		})
		if err == nil || buffered || !errors.Is(err, ingest.ErrUnordered) {
			return
		}
	}
}

// parseFile writes data as a file called name and, if it opens as a
// dataset, parses all of it (parseAll).
func parseFile(t *testing.T, name string, data []byte) {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	parseAll(t, p, "")
}

// FuzzZipSource: any bytes given as a .zip are rejected cleanly or read.
func FuzzZipSource(f *testing.F) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range map[string]string{"Z/Z_A.txt": "1, 2\n2, 1\n", "Z/Z_graph_indicator.txt": "1\n1\n", "Z/Z_graph_labels.txt": "0\n"} {
		w, _ := zw.Create(name)
		w.Write([]byte(body))
	}
	zw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("PK\x03\x04garbage"))
	f.Fuzz(func(t *testing.T, data []byte) { parseFile(t, "in.zip", data) })
}

// FuzzGIN: any bytes given as a GIN text file are rejected cleanly (an
// *ingest.FormatError naming the line) or read.
func FuzzGIN(f *testing.F) {
	tiny, _ := os.ReadFile("../../testdata/gin/TINY/TINY.txt")
	f.Add(tiny)
	f.Add([]byte("1\n2 0\n0 1 1\n0 1 0\n"))
	f.Add([]byte("2\n1 0\n0 0\n"))
	f.Add([]byte("1\n1 5\n0 0 0.5 x\n"))
	f.Fuzz(func(t *testing.T, data []byte) { parseFile(t, "G.txt", data) })
}

// FuzzTarSource: any bytes given as an archive (the container is sniffed)
// are rejected cleanly or read, and leave no spool behind.
func FuzzTarSource(f *testing.F) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct{ name, body string }{{"Z/Z_A.txt", "1, 2\n2, 1\n"}, {"Z/Z_graph_indicator.txt", "1\n1\n"}, {"Z/Z_graph_labels.txt", "0\n"}} {
		tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(e.body))
	}
	tw.Close()
	f.Add(buf.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(buf.Bytes())
	zw.Close()
	f.Add(gz.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "in")
		os.WriteFile(p, data, 0o644)
		spool := filepath.Join(dir, "spool")
		os.Mkdir(spool, 0o755)
		parseAll(t, p, spool)
		if ents, _ := os.ReadDir(spool); len(ents) != 0 {
			t.Fatalf("spool left behind: %v", ents)
		}
	})
}
