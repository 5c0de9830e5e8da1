package ipcframe_test

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/internal/ipcframe"
)

func stream(t testing.TB) []byte {
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}}, nil)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	for n := range 4 {
		b := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
		for i := range n + 1 {
			b.Append(true)
			for j := range i * 3 {
				b.ValueBuilder().(*array.Int32Builder).Append(int32(j))
			}
		}
		col := b.NewArray()
		rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		col.Release()
		b.Release()
	}
	w.Close()
	return buf.Bytes()
}

// Splitting a real arrow-go stream and joining its messages gives back the
// identical bytes.
func TestRoundTrip(t *testing.T) {
	in := stream(t)
	r := ipcframe.NewReader(bytes.NewReader(in))
	var out []byte
	msgs := 0
	for {
		meta, body, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = ipcframe.Append(out, meta, body)
		msgs++
	}
	out = append(out, ipcframe.EOS...)
	if !bytes.Equal(in, out) || msgs != 5 {
		t.Fatalf("%d messages; rejoined %d bytes, stream has %d", msgs, len(out), len(in))
	}
}

// RecordBatchBuffers lists a record batch's body buffers as arrow-go laid
// them out (a list column: validity, offsets, the values' validity, the
// values), and says a schema message is none.
func TestRecordBatchBuffers(t *testing.T) {
	r := ipcframe.NewReader(bytes.NewReader(stream(t)))
	for n := -1; ; n++ {
		meta, body, err := r.Next()
		if errors.Is(err, io.EOF) {
			if n != 4 {
				t.Fatalf("%d record batches, want 4", n)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		bufs, ok, err := ipcframe.RecordBatchBuffers(meta, nil)
		if err != nil || ok != (n >= 0) {
			t.Fatalf("message %d: ok %v, err %v", n+1, ok, err)
		}
		if n < 0 {
			continue
		}
		var want []int32
		for i := range n + 1 {
			for j := range i * 3 {
				want = append(want, int32(j))
			}
		}
		if len(bufs) != 4 {
			t.Fatalf("batch %d: %d buffers, want 4: %v", n, len(bufs), bufs)
		}
		v := bufs[3]
		got := arrow.Int32Traits.CastFromBytes(body[v.Offset : v.Offset+v.Length])
		if !slices.Equal(got, want) {
			t.Fatalf("batch %d: values buffer %v holds %v, want %v", n, v, got, want)
		}
		if o := bufs[1]; o.Length != int64(4*(n+2)) || o.Offset < bufs[0].Offset+bufs[0].Length {
			t.Fatalf("batch %d: offsets buffer %v", n, o)
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add(stream(f))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := ipcframe.NewReader(bytes.NewReader(in))
		for range 100 {
			meta, body, err := r.Next()
			if err != nil {
				return
			}
			bufs, _, err := ipcframe.RecordBatchBuffers(meta, nil)
			for _, b := range bufs {
				if err == nil && b.Offset+b.Length > int64(len(body)) {
					t.Fatalf("buffer %v past a body of %d bytes", b, len(body))
				}
			}
		}
	})
}
