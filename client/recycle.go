package client

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is the memory.Allocator of one stream's Arrow IPC reader when
// Options.Mem is nil: a message body the reader has released (its record
// batch released after fn returned) serves the next one. With Go's
// allocator every body, about a megabyte a batch, was fresh memory, and a
// COLLAB epoch's 230 MB kept the collector and the page-fault path busy
// for a third of a fetch (0.14 s against 0.095 s with GOGC=400).
//
// Allocate does not zero a reused buffer except its last 64 bytes: it
// serves only this package's readers, which overwrite what they read back
// (a message body is read in full; Arrow arrays never read past their
// lengths into the padding that rounds a buffer up to 64 bytes).
// Fresh memory, and every small allocation, is arrow-go's Go allocator's
// (zeroed, 64-byte aligned, capacity the size asked).
type recycler struct {
	mu   sync.Mutex
	free [][]byte
}

const (
	recycleMin  = 64 << 10 // smaller requests: make
	recycleKeep = 8        // buffers kept for reuse
)

var goAllocator = memory.NewGoAllocator()

func (r *recycler) Allocate(size int) []byte {
	if size >= recycleMin {
		r.mu.Lock()
		best := -1
		for i, b := range r.free {
			// The smallest that fits, not over twice the request: a large
			// buffer is kept for a large message.
			if cap(b) >= size && cap(b) <= 2*size && (best < 0 || cap(b) < cap(r.free[best])) {
				best = i
			}
		}
		if best >= 0 {
			b := r.free[best][:size]
			r.free[best] = r.free[len(r.free)-1]
			r.free = r.free[:len(r.free)-1]
			r.mu.Unlock()
			clear(b[max(0, size-64):])
			return b
		}
		r.mu.Unlock()
	}
	return goAllocator.Allocate(size)
}

func (r *recycler) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

func (r *recycler) Free(b []byte) {
	if cap(b) < recycleMin {
		return
	}
	r.mu.Lock()
	if len(r.free) < recycleKeep {
		r.free = append(r.free, b[:0])
	} else {
		// Keep the larger: a smaller one serves fewer messages.
		small := 0
		for i := range r.free {
			if cap(r.free[i]) < cap(r.free[small]) {
				small = i
			}
		}
		if cap(r.free[small]) < cap(b) {
			r.free[small] = b[:0]
		}
	}
	r.mu.Unlock()
}
