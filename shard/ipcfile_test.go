package shard

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestIPCFileMatchesArrow writes the same record batches through
// ipc.FileWriter and through ipcFile (payloads encoded apart, as the Writer
// does) and wants the same bytes: the shards stay byte-identical to what
// arrow-go writes, footer included, for every compression, schema and
// number of batches.
func TestIPCFileMatchesArrow(t *testing.T) {
	for _, comp := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		for _, kind := range []FeatureKind{FeatureLabels, FeatureAttributes} {
			for _, batches := range []int{0, 1, 3, 40} {
				t.Run(fmt.Sprintf("%s/%s/%d", comp, kind, batches), func(t *testing.T) {
					mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
					defer mem.AssertSize(t, 0)
					w := &Writer{opts: WriterOptions{FeatureKind: kind, FeatureDim: 3, EdgeLabels: kind == FeatureLabels, Compression: comp, Mem: mem}}
					w.schema = Schema("T", kind, 3, w.opts.EdgeLabels)
					rng := rand.New(rand.NewPCG(uint64(batches), 7))
					bufs := make([]*batchBuf, batches)
					for i := range bufs {
						bufs[i] = randomBatch(w, rng, int64(10*i))
					}

					var want bytes.Buffer
					fw, err := ipc.NewFileWriter(&want, append(w.encodeOptions(), ipc.WithSchema(w.schema))...)
					if err != nil {
						t.Fatal(err)
					}
					for _, b := range bufs {
						rec := w.record(b)
						err := fw.Write(rec)
						rec.Release()
						if err != nil {
							t.Fatal(err)
						}
					}
					if err := fw.Close(); err != nil {
						t.Fatal(err)
					}

					var got bytes.Buffer
					f, err := newIPCFile(&got, w.schema, mem)
					if err != nil {
						t.Fatal(err)
					}
					for _, b := range bufs {
						rec := w.record(b)
						p, err := ipc.GetRecordBatchPayload(rec, w.encodeOptions()...)
						rec.Release()
						if err != nil {
							t.Fatal(err)
						}
						err = f.writeBatch(&p)
						p.Release()
						if err != nil {
							t.Fatal(err)
						}
					}
					if err := f.close(); err != nil {
						t.Fatal(err)
					}
					if f.pos != int64(got.Len()) {
						t.Fatalf("position %d after %d bytes", f.pos, got.Len())
					}
					if !bytes.Equal(got.Bytes(), want.Bytes()) {
						i := 0
						for i < min(got.Len(), want.Len()) && got.Bytes()[i] == want.Bytes()[i] {
							i++
						}
						t.Fatalf("%d bytes, arrow-go's %d; first difference at byte %d", got.Len(), want.Len(), i)
					}
				})
			}
		}
	}
}

// randomBatch fills a batch with 1 to 10 small random graphs from id first.
func randomBatch(w *Writer, rng *rand.Rand, first int64) *batchBuf {
	b := &batchBuf{}
	b.reset(first)
	for g := range 1 + rng.IntN(10) {
		n := int32(1 + rng.IntN(30))
		b.ids = append(b.ids, first+int64(g))
		b.labels = append(b.labels, int32(rng.IntN(3)))
		b.nnodes = append(b.nnodes, n)
		for range rng.IntN(int(2 * n)) {
			u := rng.Int32N(n)
			b.edgeVals = append(b.edgeVals, u, u+rng.Int32N(n-u))
			if w.opts.EdgeLabels {
				b.elVals = append(b.elVals, rng.Int32N(4))
			}
		}
		b.edgeOff = append(b.edgeOff, int32(len(b.edgeVals)))
		b.elOff = append(b.elOff, int32(len(b.elVals)))
		for range n {
			if w.opts.FeatureKind.Categorical() {
				b.codeVals = append(b.codeVals, rng.Int32N(3))
			} else {
				b.xVals = append(b.xVals, rng.Float32(), rng.Float32(), rng.Float32())
			}
		}
		b.featOff = append(b.featOff, int32(max(len(b.codeVals), len(b.xVals))))
	}
	return b
}
