package client

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/augloader/augloader/wire"
)

func TestRecycler(t *testing.T) {
	var r recycler
	a := r.Allocate(2 * recycleMin)
	for i := range a {
		a[i] = 0xff
	}
	r.Free(a)
	b := r.Allocate(2*recycleMin - 8) // fits, and not over twice the request
	if unsafe.SliceData(b) != unsafe.SliceData(a) || len(b) != 2*recycleMin-8 {
		t.Fatalf("a freed buffer was not reused")
	}
	for i := len(b) - 64; i < len(b); i++ {
		if b[i] != 0 {
			t.Fatalf("byte %d of the reused buffer's tail is %#x, want 0", i, b[i])
		}
	}
	r.Free(b)
	if c := r.Allocate(4 * recycleMin); unsafe.SliceData(c) == unsafe.SliceData(a) || len(c) != 4*recycleMin {
		t.Fatalf("a buffer too small was handed out")
	}
	big := make([]byte, 8*recycleMin)
	r.Free(big)
	if c := r.Allocate(recycleMin); unsafe.SliceData(c) == unsafe.SliceData(big) {
		t.Fatalf("a buffer over twice the request was handed out")
	}
	r.free = r.free[:0]
	r.Free(b)
	if c := r.Allocate(4 * recycleMin); unsafe.SliceData(c) == unsafe.SliceData(a) || len(c) != 4*recycleMin {
		t.Fatalf("a buffer too small was handed out")
	}
	if c := r.Allocate(recycleMin / 4); unsafe.SliceData(c) == unsafe.SliceData(a) {
		t.Fatalf("a small request took a recycled buffer")
	}
	for _, n := range []int{1, 48, recycleMin / 3, 3 * recycleMin} {
		// Fresh memory as arrow-go's Go allocator gives it: zeroed, 64-byte aligned.
		c := r.Allocate(n)
		if len(c) != n || uintptr(unsafe.Pointer(unsafe.SliceData(c)))%64 != 0 {
			t.Fatalf("Allocate(%d): len %d at %p", n, len(c), unsafe.SliceData(c))
		}
	}
	for range 2 * recycleKeep {
		r.Free(make([]byte, recycleMin))
	}
	if len(r.free) != recycleKeep {
		t.Fatalf("%d buffers kept, want %d", len(r.free), recycleKeep)
	}
	r.Free(make([]byte, 8*recycleMin)) // replaces a smaller one
	if got := r.Allocate(5 * recycleMin); cap(got) != 8*recycleMin {
		t.Fatalf("the larger buffer was not kept")
	}
}

// A fetch's default memory: a batch released after fn is reused for a
// later one, and a batch fn retains keeps its bytes to the end.
func TestDefaultMemoryReusedUnlessRetained(t *testing.T) {
	const batches, rows = 12, 100_000 // 400 KB a batch: past recycleMin
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int32}}, nil)
	var conv bytes.Buffer
	if err := wire.WriteFrame(&conv, wire.MagicResponse, wire.StatusOK, wire.Response{Batches: batches}); err != nil {
		t.Fatal(err)
	}
	w := ipc.NewWriter(&conv, ipc.WithSchema(schema))
	for i := range batches {
		b := array.NewInt32Builder(memory.DefaultAllocator)
		for k := range rows {
			b.Append(int32(i*rows + k))
		}
		col := b.NewArray()
		rec := array.NewRecordBatch(schema, []arrow.Array{col}, rows)
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		col.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := wire.WriteFrame(&conv, wire.MagicTrailer, wire.StatusOK, wire.Trailer{Batches: batches}); err != nil {
		t.Fatal(err)
	}

	var kept []arrow.RecordBatch
	seen := map[*int32]int{}
	i := 0
	_, err := Read(bytes.NewReader(conv.Bytes()), Options{}, func(rec arrow.RecordBatch) error {
		v := rec.Column(0).(*array.Int32).Int32Values()
		seen[unsafe.SliceData(v)]++
		if i%4 == 1 {
			rec.Retain()
			kept = append(kept, rec)
		}
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) >= batches {
		t.Fatalf("%d batches in %d distinct buffers: none was reused", batches, len(seen))
	}
	for j, rec := range kept {
		v := rec.Column(0).(*array.Int32).Int32Values()
		for k, x := range v {
			if want := int32((4*j+1)*rows + k); x != want {
				t.Fatalf("retained batch %d changed: value %d is %d, want %d", 4*j+1, k, x, want)
			}
		}
		rec.Release()
	}
}
