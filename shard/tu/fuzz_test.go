package tu_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/shard/tu"
)

// parseAll runs the whole reader on a source and checks what it yields.
func parseAll(t *testing.T, src *tu.Source) {
	ds, err := tu.Load(src, tu.FeaturesAuto)
	if err != nil {
		return
	}
	for _, buffered := range []bool{false, true} {
		_, err := ds.Graphs(context.Background(), buffered, func(g *shard.Graph) error {
			for k := 0; k < len(g.Edges); k += 2 {
				if u, v := g.Edges[k], g.Edges[k+1]; u < 0 || u >= v || v >= g.NumNodes {
					t.Fatalf("graph %d: edge (%d, %d) not canonical for %d nodes", g.ID, u, v, g.NumNodes)
				}
			}
			return nil
		})
		if err == nil || buffered {
			return
		}
	}
}

// FuzzTUFiles: the TU text parser never panics on any A / indicator /
// labels / node-labels content, and what it accepts is canonical.
func FuzzTUFiles(f *testing.F) {
	f.Add([]byte("1, 2\n2, 1\n2, 3\n"), []byte("1\n1\n2\n"), []byte("1\n-1\n"), []byte("0\n1\n2\n"))
	f.Add([]byte("1,1\n"), []byte("1\n"), []byte("5\n"), []byte(""))
	f.Add([]byte("3, 1\n1, 3\n"), []byte("1\n2\n2\n"), []byte("0\n1\n"), []byte("x\n"))
	f.Fuzz(func(t *testing.T, a, ind, labels, nodeLabels []byte) {
		dir := t.TempDir()
		write := func(name string, b []byte) { os.WriteFile(filepath.Join(dir, "F_"+name+".txt"), b, 0o644) }
		write("A", a)
		write("graph_indicator", ind)
		write("graph_labels", labels)
		if len(nodeLabels) > 0 {
			write("node_labels", nodeLabels)
		}
		src, err := tu.OpenSource(dir, "F")
		if err != nil {
			return
		}
		defer src.Close()
		parseAll(t, src)
	})
}

// parseFile writes data as a file called name and, if it opens as a
// dataset, parses all of it (parseAll).
func parseFile(t *testing.T, name string, data []byte) {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := tu.Open(p, tu.OpenOptions{})
	if err != nil {
		return
	}
	defer src.Close()
	parseAll(t, src)
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

// FuzzGIN: any bytes given as a GIN text file are rejected cleanly (a
// *tu.FormatError naming the line) or read.
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
		src, err := tu.Open(p, tu.OpenOptions{SpoolDir: spool})
		if err == nil {
			parseAll(t, src)
			src.Close()
		}
		if ents, _ := os.ReadDir(spool); len(ents) != 0 {
			t.Fatalf("spool left behind: %v", ents)
		}
	})
}
