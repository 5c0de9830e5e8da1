package tu_test

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

	"github.com/augloader/augloader/internal/testutil"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/shard/tu"
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
	ds     *tu.Dataset
	graphs []shard.Graph
}

func load(t *testing.T, p string, spool string) loaded {
	t.Helper()
	src, err := tu.Open(p, tu.OpenOptions{SpoolDir: spool})
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	defer src.Close()
	ds, err := tu.Load(src, tu.FeaturesAuto)
	if err != nil {
		t.Fatal(err)
	}
	out := loaded{ds: ds}
	if _, err := ds.Graphs(context.Background(), false, func(g *shard.Graph) error {
		c := *g
		c.Edges = append([]int32(nil), g.Edges...)
		c.Codes = append([]int32(nil), g.Codes...)
		c.EdgeLabels = nil
		out.graphs = append(out.graphs, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameGraphs(t *testing.T, name string, got, want loaded) {
	t.Helper()
	if got.ds.NumGraphs != want.ds.NumGraphs || got.ds.NumNodes != want.ds.NumNodes ||
		got.ds.FeatureKind != want.ds.FeatureKind || got.ds.FeatureDim != want.ds.FeatureDim ||
		fmt.Sprint(got.ds.Labels) != fmt.Sprint(want.ds.Labels) {
		t.Fatalf("%s: %d graphs, %d nodes, %s×%d, labels %v; want %d, %d, %s×%d, %v", name,
			got.ds.NumGraphs, got.ds.NumNodes, got.ds.FeatureKind, got.ds.FeatureDim, got.ds.Labels,
			want.ds.NumGraphs, want.ds.NumNodes, want.ds.FeatureKind, want.ds.FeatureDim, want.ds.Labels)
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
			src, err := tu.Open(c.path, tu.OpenOptions{SpoolDir: t.TempDir()})
			if err == nil {
				_, err = tu.Load(src, tu.FeaturesAuto)
				src.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
			}
			var fe *tu.FormatError
			if c.want != "no such file" && !errors.As(err, &fe) {
				t.Errorf("%s: %v is not a *tu.FormatError", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still blocked after 5 s", name)
		}
	}
}
