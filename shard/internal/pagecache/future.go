package pagecache

import (
	"sort"
	"sync/atomic"
)

// A Future is one stream's known use of the cache: the graphs (by page and
// storage position) that each of its batches pins, in order. Safe for one
// writer of each batch's marks and many readers.
type Future struct {
	// page p's batches are at[start[p]:start[p+1]], in order.
	start, at []int32
	// now is the oldest batch not yet sent (Stream.ReleaseBatch).
	now atomic.Int64
	// lastUse[pos] is the last batch that pins the graph at position pos
	// (-1: none, or that batch is built).
	lastUse []atomic.Int32
	// left[b] counts b's planned pins not yet released, with begun set by
	// b's first pin.
	left []atomic.Int32
	// hold[p] is the last batch that may pin page p outside its plan
	// (mayPin: SubMix's partners, drawn from the batch's window while it
	// is built); every graph of p is needed until it is sent. nil: none.
	hold []int32
	uses func(b int, visit func(page int, pos int64))
}

// NewFuture builds the future of a stream of batches batches over a
// source of numPages pages and numGraphs graph positions, whose batch b
// pins the graphs uses(b) visits, once per pin (repeats allowed). uses is
// called again as batches are read ahead, built and sent. mayPin (nil:
// none) visits the pages batch b may also pin while it is built, beyond
// its plan and not read ahead: a SubMix partner is any graph of the
// target's window, so the window's pages stay needed, whole, until the
// window's last batch is sent. 4 bytes a page (8 with mayPin), a
// (batch, page) pair, a graph and a batch.
func NewFuture(numPages int, numGraphs int64, batches int, uses func(b int, visit func(page int, pos int64)), mayPin func(b int, visit func(page int))) *Future {
	f := &Future{uses: uses, lastUse: make([]atomic.Int32, numGraphs), left: make([]atomic.Int32, batches)}
	if mayPin != nil {
		f.hold = make([]int32, numPages)
		for i := range f.hold {
			f.hold[i] = -1
		}
	}
	count := make([]int32, numPages+1)
	last := make([]int32, numPages)
	for i := range last {
		last[i] = -1
	}
	for i := range f.lastUse {
		f.lastUse[i].Store(-1)
	}
	for b := range batches {
		n := int32(0)
		uses(b, func(p int, pos int64) {
			n++
			f.lastUse[pos].Store(int32(b))
			if last[p] != int32(b) {
				last[p] = int32(b)
				count[p+1]++
			}
		})
		f.left[b].Store(n)
		if mayPin != nil {
			mayPin(b, func(p int) {
				f.hold[p] = int32(b)
				if last[p] != int32(b) {
					last[p] = int32(b)
					count[p+1]++
				}
			})
		}
	}
	for p := range numPages {
		count[p+1] += count[p]
	}
	f.start, f.at = count, make([]int32, count[numPages])
	fill := append([]int32(nil), count[:numPages]...)
	for i := range last {
		last[i] = -1
	}
	for b := range batches {
		add := func(p int) {
			if last[p] != int32(b) {
				last[p] = int32(b)
				f.at[fill[p]] = int32(b)
				fill[p]++
			}
		}
		uses(b, func(p int, _ int64) { add(p) })
		if mayPin != nil {
			mayPin(b, add)
		}
	}
	return f
}

// Bytes is what the future holds.
func (f *Future) Bytes() int64 {
	return 4 * int64(len(f.start)+len(f.at)+len(f.lastUse)+len(f.left)+len(f.hold))
}

// batches is the future's batch count.
func (f *Future) batches() int { return len(f.left) }

// pagesOf visits batch b's pages, each run of pins of one page once.
func (f *Future) pagesOf(b int, visit func(p int)) {
	last := -1
	f.uses(b, func(p int, _ int64) {
		if p != last {
			visit(p)
			last = p
		}
	})
}

// begunBit marks left[b] once b's first pin was taken.
const begunBit = 1 << 30

// begin reports whether this is batch b's first pin, marking it taken.
func (f *Future) begin(b int) bool {
	for {
		v := f.left[b].Load()
		if v&begunBit != 0 {
			return false
		}
		if f.left[b].CompareAndSwap(v, v|begunBit) {
			return true
		}
	}
}

// released counts one of b's planned pins released and reports whether
// it was the last.
func (f *Future) released(b int) bool {
	return f.left[b].Add(-1)&^begunBit == 0
}

// lastBatch is the last batch that pins page p (-1: none).
func (f *Future) lastBatch(p int) int {
	if f.start[p] == f.start[p+1] {
		return -1
	}
	return int(f.at[f.start[p+1]-1])
}

// built marks batch b built: its graphs of which it was the last use are
// not needed again, though b is not yet sent.
func (f *Future) built(b int) {
	f.uses(b, func(_ int, pos int64) { f.lastUse[pos].CompareAndSwap(int32(b), -1) })
}

// needs reports whether the stream needs the graph at position pos of
// page p at its oldest unsent batch or after.
func (f *Future) needs(p int, pos int64) bool {
	return int64(f.last(p, pos)) >= f.now.Load()
}

// last is the last batch that may pin the graph at position pos of page
// p: its own last use, or its page's hold.
func (f *Future) last(p int, pos int64) int32 {
	u := f.lastUse[pos].Load()
	if f.hold != nil {
		u = max(u, f.hold[p])
	}
	return u
}

// distance is how many batches ahead of the stream's position page p is
// next needed (never: not again).
func (f *Future) distance(p int) int64 {
	if p < 0 || p+1 >= len(f.start) {
		return never
	}
	uses := f.at[f.start[p]:f.start[p+1]]
	now := f.now.Load()
	i := sort.Search(len(uses), func(i int) bool { return int64(uses[i]) >= now })
	if i == len(uses) {
		return never
	}
	return int64(uses[i]) - now
}
