package arrowx

import (
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Bounded is an Arrow allocator that holds at most Limit bytes at once: an
// allocation past it panics with Over(asked, held) before anything is
// allocated, for the decoder's recover to turn into an error naming the
// input. Arrow's decoders allocate what an input declares (a compressed
// buffer's length prefix, a Parquet page's value count) before they
// inflate a byte, and Go's fatal out-of-memory cannot be recovered: the
// bound is the one defence. Free may come from another goroutine (a
// record released later), so the count is atomic.
type Bounded struct {
	memory.Allocator
	Limit int64
	Over  func(asked, held int64) any
	held  atomic.Int64
}

func (a *Bounded) charge(n int) {
	if h := a.held.Add(int64(n)); n > 0 && h > a.Limit {
		a.held.Add(-int64(n))
		panic(a.Over(int64(n), h-int64(n)))
	}
}

// Allocate allocates size bytes, within the bound.
func (a *Bounded) Allocate(size int) []byte {
	a.charge(size)
	return a.Allocator.Allocate(size)
}

// Reallocate grows (or shrinks) b to size bytes, within the bound.
func (a *Bounded) Reallocate(size int, b []byte) []byte {
	a.charge(size - len(b))
	return a.Allocator.Reallocate(size, b)
}

// Free gives b back.
func (a *Bounded) Free(b []byte) {
	a.held.Add(-int64(len(b)))
	a.Allocator.Free(b)
}
