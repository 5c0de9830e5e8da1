package ipcframe_test

import (
	"bytes"
	"errors"
	"io"
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

func FuzzReader(f *testing.F) {
	f.Add(stream(f))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := ipcframe.NewReader(bytes.NewReader(in))
		for range 100 {
			if _, _, err := r.Next(); err != nil {
				return
			}
		}
	})
}
