package parquet_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/parquet"
	"github.com/augloader/augloader/shard"
)

// FuzzParquet: any bytes named .parquet are read as graphs or refused
// with an error, never a panic.
func FuzzParquet(f *testing.F) {
	dir := f.TempDir()
	p := filepath.Join(dir, "seed.parquet")
	write(&testing.T{}, p, base(), 1)
	seed, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "x.parquet")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files, err := ingest.OpenFiles(p, ingest.FilesOptions{})
		if err != nil {
			return
		}
		defer files.Close()
		d, err := parquet.Format{}.Open(files, "", ingest.OpenOptions{})
		if err != nil {
			return
		}
		defer d.Close()
		for range 3 { // a reread at most twice
			_, err = d.Graphs(context.Background(), ingest.ReadOptions{}, func(*shard.Graph) error { return nil })
			if err == nil {
				return
			}
		}
	})
}
