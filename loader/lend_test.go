package loader_test

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/wire"
)

// roomLender lends every batch fresh room, as much as room(b, edges)
// says (in directed edges; negative: none), and keeps the loans to check
// what was written where. What the shared-memory ring's lender (server's
// shmWriter) adds, placing the message around the columns, is tested
// there; this is the loader's side of the contract.
type roomLender struct {
	room  func(b, edges int) int
	mu    sync.Mutex
	loans map[int][2][]int32 // batch: the whole src and dst lent
}

func (r *roomLender) LendEdges(_ context.Context, b, rows, edges int, rest int64) ([]int32, []int32, bool) {
	n := r.room(b, edges)
	if n < 0 {
		return nil, nil, false
	}
	src := make([]int32, loader.EdgeSrcSlots(n))
	dst := make([]int32, n+1) // mergeRun's slack slot, as the ring's lender gives
	r.mu.Lock()
	r.loans[b] = [2][]int32{src, dst}
	r.mu.Unlock()
	return src, dst[:0], true
}

// int32Values is the values of rec's int32 list column name, where they
// lie (listValues copies them).
func int32Values(rec arrow.RecordBatch, name string) []int32 {
	return rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.List).ListValues().(*array.Int32).Int32Values()
}

// within reports whether v lies in lent, from lent[at].
func within(v, lent []int32, at int) bool {
	if len(v) == 0 || at < 0 || at+len(v) > len(lent) {
		return false
	}
	return unsafe.SliceData(v) == &lent[at]
}

// TestLentEdgesSameBytes: a stream whose batches' edges are written into
// lent room is the stream without a lender, byte for byte, whether a batch
// gets all the room its bound asks, none, or less than it needs (a bound
// that was off: its edges go on the heap, as unlent, and the transport
// copies them). A batch given its room has edge_dst at the start of its
// lent dst and edge_src at the end of its lent src: written once, there;
// and no loan is written once its batch is (the ring's lender hands the
// room to the client then).
func TestLentEdgesSameBytes(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	for _, c := range []struct {
		name    string
		workers int
		room    func(b, edges int) int
		lent    func(b int) bool // whether batch b's columns must lie in its loan
	}{
		{"every batch", 1, func(_, e int) int { return e }, func(int) bool { return true }},
		{"every batch, 4 workers", 4, func(_, e int) int { return e }, func(int) bool { return true }},
		{"every other refused", 2, func(b, e int) int {
			if b%2 == 1 {
				return -1
			}
			return e
		}, func(b int) bool { return b%2 == 0 }},
		{"bounds off", 2, func(b, e int) int {
			if b%2 == 1 {
				return e / 3
			}
			return e
		}, func(b int) bool { return b%2 == 0 }},
		{"no room at all", 1, func(int, int) int { return 0 }, func(int) bool { return false }},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLoader(t, dir, loader.Config{Workers: c.workers}, nil)
			req := wire.Request{Epoch: 3, World: 1, BatchSize: 7}
			want, _ := stream(t, l, req)
			p, err := l.Plan(req)
			if err != nil {
				t.Fatal(err)
			}
			// Repeated: which collator (of sync.Pool's) builds a batch after
			// a lent one varies from run to run.
			for range 4 {
				lentStream(t, l, p, c.room, c.lent, want)
			}
		})
	}
}

// lentStream streams p with a roomLender lending room(b, edges), and
// checks it against want, the stream without a lender.
func lentStream(t *testing.T, l *loader.Loader, p *loader.Plan, room func(b, edges int) int, lent func(b int) bool, want []byte) {
	t.Helper()
	lender := &roomLender{room: room, loans: map[int][2][]int32{}}
	p.Lender = lender
	var got bytes.Buffer
	iw := ipc.NewWriter(&got, ipc.WithSchema(p.Schema))
	b, lentBatches := 0, 0
	written := map[int][2][]int32{} // each loan as its batch was written: nothing writes there after
	if _, err := l.Stream(context.Background(), p, func(rec arrow.RecordBatch) error {
		src, dst := int32Values(rec, "edge_src"), int32Values(rec, "edge_dst")
		lender.mu.Lock()
		loan, ok := lender.loans[b]
		lender.mu.Unlock()
		inPlace := ok && within(dst, loan[1], 0) && within(src, loan[0], len(loan[0])-loader.EdgeSrcSlots(len(src)))
		if inPlace != lent(b) {
			t.Errorf("batch %d (%d edges): columns in its loan %v, want %v", b, len(dst), inPlace, lent(b))
		}
		if inPlace {
			lentBatches++
		}
		if ok {
			written[b] = [2][]int32{slices.Clone(loan[0]), slices.Clone(loan[1])}
		}
		b++
		return iw.Write(rec)
	}); err != nil {
		t.Fatal(err)
	}
	if err := iw.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("the stream with a lender (%d of %d batches lent) differs from the stream without", lentBatches, b)
	}
	for k, w := range written {
		if loan := lender.loans[k]; !slices.Equal(loan[0], w[0]) || !slices.Equal(loan[1], w[1]) {
			t.Errorf("batch %d's loan was written after the batch was", k)
		}
	}
	if b < 8 {
		t.Fatalf("%d batches: too few to mix lent and unlent ones", b)
	}
}
