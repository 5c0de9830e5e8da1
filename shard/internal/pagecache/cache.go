package pagecache

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A Page is one decoded page, as its Source made it.
type Page interface {
	// Weight is the share of the page's bytes that its graph at index i
	// (of the page as it is now) holds, in any unit; Total sums them.
	Weight(i int) int64
	Total() int64
	// Subset copies the graphs at indexes keep, in order, into a page of
	// their own and returns it with its bytes.
	Subset(keep []int) (Page, int64)
	// Release frees what the page holds outside Go's heap.
	Release()
}

// A Source reads pages for the cache.
type Source interface {
	NumPages() int
	// Graphs is page p's graphs: storage positions first..first+n-1.
	Graphs(p int) (first, n int64)
	// Estimate is page p's decoded bytes, estimated without reading it.
	Estimate(p int) int64
	// Load reads, checks and decodes page p with mem, giving up once ctx
	// ends (an error wrapping ctx's).
	Load(ctx context.Context, p int, mem memory.Allocator) (Page, error)
}

// A Charge is what a user keeps beside a page's graphs, derived from them
// and rebuilt at will (the loader's NodeSam index of a graph).
type Charge interface {
	Bytes() int64
	// Forget drops it; called under the cache's lock, so it must not
	// call back into the cache.
	Forget()
}

// Cache holds pages of a Source under a byte limit.
type Cache struct {
	src   Source
	limit int64
	mem   memory.Allocator

	mu    sync.Mutex
	slots []slot
	used  int64
	// private counts the private reads held (pinPrivate), their bytes in
	// used; futureBytes is the registered futures' bytes, in used too.
	private     int
	futureBytes int64
	// The loaded pages no one pins, least recently released first: cold
	// ones (Cool) and warm ones, so a drop takes O(1) whatever the page
	// count. coldHeld is what the cold list holds; resident counts the
	// loaded pages.
	warm, cold list
	coldHeld   int64
	resident   int
	// futures are the registered streams' graph uses: with any, eviction
	// is by next use, not by recency.
	futures []*Future

	loads, evictions, sheds atomic.Int64
	compactions, trims      atomic.Int64
	peak                    atomic.Int64

	// decoded and estimated sum the actual and the estimated bytes of
	// every load so far, to correct the estimate of a page to prefetch.
	decoded, estimated int64
	prefetching        int
	prefetches         atomic.Int64
	// The prefetch goroutines running, which Close waits for (a page one
	// of them loads after Close would stay resident); closed stops new ones.
	// Their reads run under life, which Close ends: a read ahead of a
	// stalled store does not hold Close.
	prefetchers sync.WaitGroup
	// loading counts the pins' loads under way, which Close waits for
	// (one that lands after it would leave its bytes held).
	loading sync.WaitGroup
	closed  bool
	life    context.Context
	end     context.CancelFunc
}

// New makes a cache of src's pages holding at most limit bytes (over it
// only while everything resident is pinned), decoding with mem.
func New(src Source, limit int64, mem memory.Allocator) *Cache {
	life, end := context.WithCancel(context.Background())
	return &Cache{src: src, limit: limit, mem: mem, slots: make([]slot, src.NumPages()), warm: newList(), cold: newList(),
		life: life, end: end}
}

type slot struct {
	ready   *loading // the load under way, if any
	loaded  bool
	page    Page
	bytes   int64    // decoded bytes
	charged int64    // the charges' bytes
	charges []Charge // forgotten when shed or dropped
	pins    int
	// cold: no batch ahead needs it (Cool); dropped first, and dropped to
	// make room for a Prefetch.
	cold bool
	// The page's place in the warm or cold list while loaded and unpinned
	// (in nil otherwise).
	in         *list
	prev, next int32
	// rows maps the page's graphs to page's indexes once compacted (-1:
	// not kept; compact.go); nil while page holds them all.
	rows []int32
}

// list is a doubly linked list of pages threaded through their slots.
type list struct{ head, tail int32 }

func newList() list { return list{-1, -1} }

// push appends page p.
func (c *Cache) push(l *list, p int) {
	s := &c.slots[p]
	s.in, s.prev, s.next = l, l.tail, -1
	if l.tail >= 0 {
		c.slots[l.tail].next = int32(p)
	} else {
		l.head = int32(p)
	}
	l.tail = int32(p)
	if l == &c.cold {
		c.coldHeld += s.bytes + s.charged
	}
}

// unlink takes page p out of its list, if any.
func (c *Cache) unlink(p int) {
	s := &c.slots[p]
	l := s.in
	if l == nil {
		return
	}
	if s.prev >= 0 {
		c.slots[s.prev].next = s.next
	} else {
		l.head = s.next
	}
	if s.next >= 0 {
		c.slots[s.next].prev = s.prev
	} else {
		l.tail = s.prev
	}
	if l == &c.cold {
		c.coldHeld -= s.bytes + s.charged
	}
	s.in, s.prev, s.next = nil, -1, -1
}

// Stats describe the cache.
type Stats struct {
	Limit, Used, Peak int64
	// Loads counts pages read and decoded (again after an eviction),
	// Evictions pages dropped, Resident the pages held.
	Loads, Evictions int64
	Resident         int
	// Prefetches counts the reads ahead started.
	Prefetches int64
	// Scans counts shard files read through to index their pages (once
	// each, the first time a page of theirs is needed); the Source counts
	// them.
	Scans int64
	// Sheds counts charges forgotten with their page kept.
	Sheds int64
	// Compactions counts pages shrunk to the graphs still needed, Trims
	// those of them shrunk further by the graphs needed last.
	Compactions, Trims int64
	// Private is the private reads held now: a page read again whole for
	// a graph compacted away from it while others pin it, counted in Used.
	Private int
	// Futures is the bytes of the streams' registered futures, counted in
	// Used.
	Futures int64
}

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Limit: c.limit, Used: c.used, Peak: c.peak.Load(), Loads: c.loads.Load(), Evictions: c.evictions.Load(),
		Resident: c.resident, Prefetches: c.prefetches.Load(), Sheds: c.sheds.Load(),
		Compactions: c.compactions.Load(), Trims: c.trims.Load(), Private: c.private, Futures: c.futureBytes}
}

func (c *Cache) notePeak() {
	if c.used > c.peak.Load() {
		c.peak.Store(c.used)
	}
}

// countingAlloc counts the bytes a page's decoding holds.
type countingAlloc struct {
	memory.Allocator
	n atomic.Int64
}

func (a *countingAlloc) Allocate(size int) []byte {
	a.n.Add(int64(size))
	return a.Allocator.Allocate(size)
}

func (a *countingAlloc) Reallocate(size int, b []byte) []byte {
	a.n.Add(int64(size - len(b)))
	return a.Allocator.Reallocate(size, b)
}

// Free uncounts what decoding dropped (a compressed body once inflated).
func (a *countingAlloc) Free(b []byte) {
	a.n.Add(-int64(len(b)))
	a.Allocator.Free(b)
}

// maxPrefetch bounds the pages read ahead at once.
const maxPrefetch = 2

// Prefetch starts reading page p on a goroutine of its own when it is
// neither held nor being read and the cache has room for it without
// dropping anything a stream needs sooner (its decoded size estimated).
// Errors are left to the Pin that needs the page.
func (c *Cache) Prefetch(p int) { c.prefetch(c.life, p) }

// prefetch is Prefetch for a reader whose context is ctx (a stream's
// request): the read ends with it, or with Close, whichever is first. A
// stream whose client went away leaves no read ahead waiting on a
// stalled store for its timeouts.
func (c *Cache) prefetch(ctx context.Context, p int) {
	if p < 0 || p >= len(c.slots) {
		return
	}
	est := c.src.Estimate(p)
	c.mu.Lock()
	s := &c.slots[p]
	if c.estimated > 0 {
		est = int64(float64(est) * float64(c.decoded) / float64(c.estimated))
	}
	if c.closed || s.loaded || s.ready != nil || c.prefetching >= maxPrefetch || !c.roomFor(p, est) {
		c.mu.Unlock()
		return
	}
	c.prefetching++
	c.prefetchers.Add(1)
	c.mu.Unlock()
	c.prefetches.Add(1)
	go func() {
		defer c.prefetchers.Done()
		if ctx != c.life {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer context.AfterFunc(c.life, cancel)()
			defer cancel()
		}
		if _, err := c.acquire(ctx, p, -1); err == nil {
			c.unpin(p)
		}
		c.mu.Lock()
		c.prefetching--
		c.mu.Unlock()
	}()
}

// Cool says no batch ahead needs page p: it is dropped before any other,
// and to make room for a Prefetch. A later Pin makes it warm again.
func (c *Cache) Cool(p int) {
	if p < 0 || p >= len(c.slots) {
		return
	}
	c.mu.Lock()
	if s := &c.slots[p]; s.loaded && !s.cold {
		s.cold = true
		if s.in == &c.warm {
			c.unlink(p)
			c.push(&c.cold, p)
		}
	}
	c.mu.Unlock()
}

// Charge attaches ch to loaded page p: its bytes count with the page's
// until it is shed or the page dropped (then ch.Forget). A page not
// loaded (or gone meanwhile) forgets it at once.
func (c *Cache) Charge(p int, ch Charge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.slots[p]
	if !s.loaded {
		ch.Forget()
		return
	}
	n := ch.Bytes()
	s.charges = append(s.charges, ch)
	s.charged += n
	c.used += n
	if s.in == &c.cold {
		c.coldHeld += n
	}
	c.notePeak()
	c.evictLocked()
}

// Close ends the reads ahead and the pins' loads under way and waits for
// them (each needs mu to finish), then releases every page; a pin after it
// is refused (ErrClosed).
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.end()
	c.prefetchers.Wait()
	c.loading.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.slots {
		s := &c.slots[i]
		if s.page != nil {
			s.page.Release()
		}
		for _, ch := range s.charges {
			ch.Forget()
		}
		*s = slot{}
	}
	c.used, c.coldHeld, c.resident = 0, 0, 0
	c.warm, c.cold = newList(), newList()
}
