package tu_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/tu"
	"github.com/augloader/augloader/shard"
)

// parseAll runs the whole reader on a source and checks what it yields.
func parseAll(t *testing.T, src *tu.Source) {
	ds, err := tu.Load(src, tu.FeaturesAuto)
	if err != nil {
		return
	}
	for _, buffered := range []bool{false, true} {
		_, err := ds.Graphs(context.Background(), ingest.ReadOptions{Buffered: buffered}, func(g *shard.Graph) error {
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
