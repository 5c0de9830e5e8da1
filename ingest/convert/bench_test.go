package convert

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/augloader/augloader/ingest/synth"
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
	convertEach(b, in)
}

// convertEach converts in b.N times into the same output folder, timed.
func convertEach(b *testing.B, in string) {
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

// BenchmarkConvertMolpcba converts a synthetic ogbg-molpcba-shaped OGB
// folder (shardconv synth --like ogbg-molpcba, 50,000 molecules) per
// iteration, reporting molecules/s:
//
//	go test -run XXX -bench ConvertMolpcba -benchtime 3x -cpuprofile cpu.out ./ingest/convert
func BenchmarkConvertMolpcba(b *testing.B) {
	spec, _ := synth.LikeOGB("ogbg-molpcba")
	spec = spec.Scaled(50000)
	in := filepath.Join(b.TempDir(), "molpcba")
	if _, err := synth.WriteOGB(context.Background(), spec, 1, in, false); err != nil {
		b.Fatal(err)
	}
	convertEach(b, in)
	b.ReportMetric(float64(spec.Graphs)*float64(b.N)/b.Elapsed().Seconds(), "graphs/s")
}
