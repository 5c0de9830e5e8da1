package convert_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/shard"
)

// converted is what converting in gave: the manifest's description of
// the data (not the sources' hashes, which name the damaged bytes) and
// every graph, or the error that refused it. A refused conversion leaves
// nothing behind.
func converted(t *testing.T, in string) (string, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "shards")
	_, err := convert.Run(context.Background(), convert.Options{Input: in, Out: out})
	if err != nil {
		if _, serr := os.Stat(out); serr == nil {
			t.Fatalf("a refused conversion left %s", out)
		}
		return "", err
	}
	defer os.RemoveAll(out)
	r, err := shard.Open(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := r.Manifest()
	var b strings.Builder
	fmt.Fprintln(&b, m.Dataset, m.Classes, m.LabelMap, m.Features, m.EdgeLabelDim, m.Stats)
	for i := range r.NumGraphs() {
		g, err := r.Graph(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%+v\n", g)
	}
	return b.String(), nil
}

// A TU dataset in a compressed archive cut short anywhere is refused (or,
// for a plain tar cut in its end-of-archive padding, gives the same
// graphs): the tar's gzip or xz stream is read to its trailer, a zip's
// entries to their CRC-32.
func TestTruncatedArchivesEveryCut(t *testing.T) {
	files := folderFiles(t, filepath.Join("..", "..", "testdata", "tu", "TINY"), "TINY/")
	for _, kind := range []string{"tar.gz", "tar.xz", "zip", "tar"} {
		t.Run(kind, func(t *testing.T) {
			p := archive(t, kind, files)
			want, err := converted(t, p)
			if err != nil {
				t.Fatal(err)
			}
			whole, _ := os.ReadFile(p)
			same, cuts := 0, 0
			for n := 1; n < len(whole); n++ {
				// A plain tar is mostly zero padding: its cuts at and
				// around every 512-byte block boundary, and a sample
				// between them.
				if kind == "tar" && n%512 > 1 && n%512 < 511 && n%41 != 0 {
					continue
				}
				cuts++
				os.WriteFile(p, whole[:n], 0o644)
				got, err := converted(t, p)
				switch {
				case err == nil && got != want:
					t.Fatalf("cut to %d of %d bytes converted to other data:\n%s\nwant\n%s", n, len(whole), got, want)
				case err == nil && kind != "tar":
					t.Fatalf("cut to %d of %d bytes converted (a cut %s must be refused)", n, len(whole), kind)
				case err == nil:
					same++
				case !errors.Is(err, ingest.ErrFormat):
					t.Fatalf("cut to %d bytes: %v (want an input error)", n, err)
				}
			}
			t.Logf("%d cuts: %d refused, %d the same graphs", cuts, cuts-same, same)
		})
	}
}

// A TU zip with one byte flipped anywhere, its entries stored or
// deflated, converts to exactly the intact graphs or is refused.
func TestZipFlippedBytes(t *testing.T) {
	files := folderFiles(t, filepath.Join("..", "..", "testdata", "tu", "TINY"), "TINY/")
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		t.Run(map[uint16]string{zip.Store: "stored", zip.Deflate: "deflated"}[method], func(t *testing.T) {
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			for _, f := range files {
				w, _ := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: method})
				w.Write(f.data)
			}
			zw.Close()
			whole := buf.Bytes()
			p := filepath.Join(t.TempDir(), "TINY.zip")
			os.WriteFile(p, whole, 0o644)
			want, err := converted(t, p)
			if err != nil {
				t.Fatal(err)
			}
			refused := 0
			for i := range whole {
				// Every third byte (all of them passed when this was
				// written); with -short, every seventh.
				if i%3 != 0 || testing.Short() && i%7 != 0 {
					continue
				}
				b := slices.Clone(whole)
				b[i] ^= 0x04
				os.WriteFile(p, b, 0o644)
				got, err := converted(t, p)
				switch {
				case err != nil:
					refused++
				case got != want:
					t.Fatalf("byte %d of %d flipped converted to other data:\n%s\nwant\n%s", i, len(whole), got, want)
				}
			}
			t.Logf("%d bytes: %d flips refused, the rest gave the intact graphs", len(whole), refused)
		})
	}
}
