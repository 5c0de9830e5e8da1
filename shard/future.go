package shard

// Eviction by next use: the loader knows the order in which a stream
// will need pages (a pure function of the seed, the epoch and the plan),
// so the cache can drop the page needed farthest ahead (Belady's rule)
// and read ahead only what displaces nothing needed sooner.

import (
	"math"
	"sort"
	"sync/atomic"
)

// Future is one stream's known use of pages: for each page, the batches
// that need it, in order; the stream says which batch it has reached
// (Advance). Safe for one writer (Advance) and many readers.
type Future struct {
	start []int32 // page p's batches are at[start[p]:start[p+1]]
	at    []int32
	now   atomic.Int64
	// lastUse[pos] is the last batch that needs the graph stored at
	// position pos (-1: none, or that batch built: Built); nil for a
	// future by page (NewFuture), which then needs every graph of a page
	// it needs.
	lastUse  []atomic.Int32
	position func(id int64) int64
}

// GraphFuture builds the future of a stream whose batch b needs the
// graphs graphsOf(b) (repeats allowed): by page as NewFuture, and by
// graph, so that a page the cache must shrink keeps only the graphs some
// stream needs again (compact.go). 4 bytes a graph.
func (r *Reader) GraphFuture(batches int, graphsOf func(b int, visit func(id int64))) *Future {
	f := NewFuture(r.NumPages(), batches, func(b int, visit func(int)) {
		graphsOf(b, func(id int64) { visit(r.PageOf(id)) })
	})
	f.lastUse = make([]atomic.Int32, r.man.Stats.Graphs)
	f.position = r.man.PositionOf
	for i := range f.lastUse {
		f.lastUse[i].Store(-1)
	}
	for b := range batches {
		graphsOf(b, func(id int64) { f.lastUse[r.man.PositionOf(id)].Store(int32(b)) })
	}
	return f
}

// Built says batch b is built: its graphs of which it was the last use
// are not needed again, though b is not yet sent (Advance). ids are b's
// graphs. A no-op for a future by page.
func (f *Future) Built(b int, ids func(visit func(id int64))) {
	if f.lastUse == nil {
		return
	}
	ids(func(id int64) { f.lastUse[f.position(id)].CompareAndSwap(int32(b), -1) })
}

// needs reports whether the stream needs the graph at position pos at
// its batch or after.
func (f *Future) needs(pos int64) bool {
	return f.lastUse == nil || int64(f.lastUse[pos].Load()) >= f.now.Load()
}

// NewFuture builds the future of a stream whose batch b needs the pages
// pagesOf(b) (repeats allowed), for a folder of numPages pages.
func NewFuture(numPages, batches int, pagesOf func(b int, visit func(page int))) *Future {
	count := make([]int32, numPages+1)
	last := make([]int32, numPages)
	for i := range last {
		last[i] = -1
	}
	for b := range batches {
		pagesOf(b, func(p int) {
			if last[p] != int32(b) {
				last[p] = int32(b)
				count[p+1]++
			}
		})
	}
	for p := range numPages {
		count[p+1] += count[p]
	}
	f := &Future{start: count, at: make([]int32, count[numPages])}
	fill := append([]int32(nil), count[:numPages]...)
	for i := range last {
		last[i] = -1
	}
	for b := range batches {
		pagesOf(b, func(p int) {
			if last[p] != int32(b) {
				last[p] = int32(b)
				f.at[fill[p]] = int32(b)
				fill[p]++
			}
		})
	}
	return f
}

// Advance says the stream has reached batch b: uses before it are past.
func (f *Future) Advance(b int) { f.now.Store(int64(b)) }

// never is the distance of a page no batch ahead needs.
const never = math.MaxInt64

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

// Foresee registers a stream's future with a reader under a cache limit:
// until the returned func is called, eviction drops the unpinned page
// whose next use by any registered stream is farthest (pages none needs
// first), and Prefetch displaces only pages needed later than the one it
// reads. Without a cache limit it does nothing.
//
// The future's own bytes (4 a graph of the whole set with a graph future,
// and 4 a page and a use) count in the cache's use while it is
// registered: a stream's future takes room from pages, not from outside
// the limit.
func (r *Reader) Foresee(f *Future) (done func()) {
	l := r.lazy
	if l == nil {
		return func() {}
	}
	n := f.Bytes()
	l.mu.Lock()
	l.futures = append(l.futures, f)
	l.used += n
	l.futureBytes += n
	l.notePeak()
	l.evictLocked()
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		for i, g := range l.futures {
			if g == f {
				l.futures = append(l.futures[:i], l.futures[i+1:]...)
				l.used -= n
				l.futureBytes -= n
				break
			}
		}
		l.mu.Unlock()
	}
}

// Bytes is what the future holds: 4 bytes a page, a use, and (a graph
// future) a graph of the set.
func (f *Future) Bytes() int64 {
	return 4 * int64(len(f.start)+len(f.at)+len(f.lastUse))
}

// nextUse is page p's distance to its next use by any registered stream
// (never without one). Under mu.
func (l *lazy) nextUse(p int) int64 {
	d := int64(never)
	for _, f := range l.futures {
		d = min(d, f.distance(p))
	}
	return d
}

// farthest returns the unpinned loaded page whose next use is farthest,
// and that distance; cold pages before warm ones and each list oldest
// first break ties. -1 when none is unpinned. Under mu, with futures.
func (l *lazy) farthest() (victim int, dist int64) {
	victim, dist = -1, -1
	for _, list := range []*pageList{&l.cold, &l.warm} {
		for p := list.head; p >= 0; p = l.slots[p].next {
			if d := l.nextUse(int(p)); d > dist {
				victim, dist = int(p), d
				if d == never {
					return victim, dist
				}
			}
		}
	}
	return victim, dist
}

// needed reports whether a registered stream needs the graph at position
// pos again (true without futures). Under mu.
func (l *lazy) needed(pos int64) bool {
	if len(l.futures) == 0 {
		return true
	}
	for _, f := range l.futures {
		if f.needs(pos) {
			return true
		}
	}
	return false
}
