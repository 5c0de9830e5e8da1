package convert

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/augloader/augloader/internal/testkit/testutil"
)

// BenchmarkConvertCOLLAB converts the real COLLAB (unpacked once) into a
// fresh folder per iteration: the figure bench/convert_collab.sh times
// from outside, here under pprof:
//
//	go test -run XXX -bench ConvertCOLLAB -benchtime 3x -cpuprofile cpu.out ./ingest/convert
func BenchmarkConvertCOLLAB(b *testing.B) {
	in := filepath.Join(testutil.UnpackTarXZ(b, testutil.Shared(b, "tu/COLLAB/COLLAB_tu.tar.xz")), "COLLAB")
	var bytes int64
	for _, n := range []string{"COLLAB_A.txt", "COLLAB_graph_indicator.txt", "COLLAB_graph_labels.txt"} {
		fi, err := os.Stat(filepath.Join(in, n))
		if err != nil {
			b.Fatal(err)
		}
		bytes += fi.Size()
	}
	b.SetBytes(bytes)
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := filepath.Join(dir, "s")
		os.RemoveAll(out)
		if _, err := Run(context.Background(), Options{Input: in, Out: out}); err != nil {
			b.Fatal(err)
		}
	}
}
