package server

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/augloader/augloader/internal/arrowx"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/wire"
)

// lendSchema is a batch's shape as far as the writer cares: columns
// before the edges, the two edge lists, columns after them.
var lendSchema = arrow.NewSchema([]arrow.Field{
	{Name: "graph_id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "num_nodes", Type: arrow.PrimitiveTypes.Int32},
	{Name: "edge_src", Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int32)},
	{Name: "edge_dst", Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int32)},
	{Name: "y", Type: arrow.PrimitiveTypes.Int32},
}, nil)

// lendRecord is a batch of rows graphs and e directed edges whose
// edge_src and edge_dst values are src and dst (e long).
func lendRecord(rows int, src, dst []int32) arrow.RecordBatch {
	ids := make([]int64, rows)
	nn := make([]int32, rows)
	y := make([]int32, rows)
	off := make([]int32, rows+1)
	for i := range rows {
		ids[i], nn[i], y[i] = int64(100+i), int32(i%7+1), int32(i%3)
		off[i+1] = int32((i + 1) * len(src) / rows)
	}
	i32 := arrow.PrimitiveTypes.Int32
	return arrowx.Record(lendSchema, rows, []arrow.Array{
		arrowx.Primitive(arrow.PrimitiveTypes.Int64, rows, arrow.Int64Traits.CastToBytes(ids)),
		arrowx.Primitive(i32, rows, arrow.Int32Traits.CastToBytes(nn)),
		arrowx.List(i32, off, len(src), arrow.Int32Traits.CastToBytes(src)),
		arrowx.List(i32, off, len(dst), arrow.Int32Traits.CastToBytes(dst)),
		arrowx.Primitive(i32, rows, arrow.Int32Traits.CastToBytes(y)),
	})
}

// received rebuilds the stream a shared-memory client reads: each
// descriptor's message from the ring or inline from out.
func received(t *testing.T, ring []byte, out []byte) []byte {
	t.Helper()
	var got []byte
	for len(out) > 0 {
		d, err := wire.ParseShmDescriptor(out[:wire.ShmDescriptorSize], uint64(len(ring)))
		if err != nil {
			t.Fatal(err)
		}
		out = out[wire.ShmDescriptorSize:]
		if d.Kind == wire.ShmInline {
			got, out = append(got, out[:d.Length]...), out[d.Length:]
			continue
		}
		got = append(got, ring[d.Offset:d.Offset+uint64(d.Length)]...)
	}
	return got
}

// The writer's every path for a lent batch gives the bytes arrow-go's
// writer gives: the columns where the loan put them (written around, not
// copied), and every way they can miss it (edge_src elsewhere in its
// room, either column on the heap, the columns outgrowing the loan, a
// batch without a loan between lent ones), each then copied.
func TestShmWriterLentPaths(t *testing.T) {
	const rows, bound = 5, 1000
	for _, tc := range []struct {
		name string
		e    int                                       // the batch's directed edges
		move func(src, dst []int32) ([]int32, []int32) // where the columns end up
		lent bool
	}{
		{"in place", 999, nil, true},
		{"in place, fewer than the bound", 900, nil, true},
		{"in place, even", 1000, nil, true},
		{"no edges", 0, nil, false},
		{"edge_src at its room's start", 900, func(s, d []int32) ([]int32, []int32) {
			return s[:0], d // the test writes s's values at its start
		}, false},
		{"edge_dst on the heap", 999, func(s, d []int32) ([]int32, []int32) { return s, nil }, true},
		{"edge_src on the heap", 999, func(s, d []int32) ([]int32, []int32) { return nil, d }, false},
		{"both on the heap", 999, func(s, d []int32) ([]int32, []int32) { return nil, nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ring := make([]byte, 1<<20)
			for i := range ring {
				ring[i] = 0xa5 // what an earlier stream left
			}
			var out bytes.Buffer
			ctx := context.Background()
			w := newShmWriter(ctx, ring, &out)
			var want bytes.Buffer
			ref := ipc.NewWriter(&want, ipc.WithSchema(lendSchema))
			iw := ipc.NewWriter(w, ipc.WithSchema(lendSchema))
			for b := range 3 {
				// Batch 1 gets no loan: it is written between lent ones.
				var roomSrc, roomDst []int32
				if b != 1 {
					var ok bool
					if roomSrc, roomDst, ok = w.LendEdges(ctx, b, rows, bound, 4096); !ok {
						t.Fatal("no loan from an empty ring")
					}
				}
				e := tc.e
				var src, dst []int32
				switch {
				case roomSrc == nil:
					src, dst = make([]int32, e), make([]int32, e)
				default:
					at := len(roomSrc) - loader.EdgeSrcSlots(e)
					src, dst = roomSrc[at:][:e], roomDst[:e]
					if tc.move != nil {
						s, d := tc.move(src, dst)
						switch {
						case s == nil:
							src = make([]int32, e)
						case len(s) == 0:
							src = roomSrc[:e]
						}
						if d == nil {
							dst = make([]int32, e)
						}
					}
				}
				for i := range e {
					src[i], dst[i] = int32(i/3+b), int32(i%97+b)
				}
				rec := lendRecord(rows, src, dst)
				if err := ref.Write(rec); err != nil {
					t.Fatal(err)
				}
				if err := iw.Write(rec); err != nil {
					t.Fatal(err)
				}
				rec.Release()
			}
			ref.Close()
			if err := iw.Close(); err != nil {
				t.Fatal(err)
			}
			if got := received(t, ring, out.Bytes()); !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("the client reads %d bytes, arrow-go wrote %d: they differ", len(got), want.Len())
			}
			if want := map[bool]int{true: 2, false: 0}[tc.lent]; w.lent != want {
				t.Fatalf("%d batches written around their lent columns, want %d", w.lent, want)
			}
			if w.inline != 0 {
				t.Fatalf("%d messages inline", w.inline)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.loans) != 0 || w.lentBytes != 0 {
				t.Fatalf("loans left: %d, %d bytes", len(w.loans), w.lentBytes)
			}
		})
	}
}
