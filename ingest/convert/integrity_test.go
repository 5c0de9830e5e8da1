package convert_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/fixture"
)

func TestMain(m *testing.M) { fixture.Main(m) }

func converted(t *testing.T, in string) (string, error) {
	t.Helper()
	return fixture.Converted(t, in, convert.Options{})
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
