package pagecache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

var ctx = context.Background()

// fakeSource's page p holds graphs at positions p·per … p·per+per−1, each
// of weight 1, and size bytes allocated through the cache's allocator.
type fakeSource struct {
	pages, per int
	size       int
}

type fakePage struct {
	pos  []int64 // the positions of the graphs it holds, in order
	buf  []byte
	mem  memory.Allocator
	size int
}

func (s *fakeSource) NumPages() int                 { return s.pages }
func (s *fakeSource) Graphs(p int) (first, n int64) { return int64(p * s.per), int64(s.per) }
func (s *fakeSource) Estimate(int) int64            { return int64(s.size) }
func (s *fakeSource) Load(ctx context.Context, p int, mem memory.Allocator) (Page, error) {
	pg := &fakePage{mem: mem, buf: mem.Allocate(s.size), size: s.size}
	for i := range s.per {
		pg.pos = append(pg.pos, int64(p*s.per+i))
	}
	return pg, nil
}

func (p *fakePage) Weight(int) int64 { return 1 }
func (p *fakePage) Total() int64     { return int64(len(p.pos)) }
func (p *fakePage) Subset(keep []int) (Page, int64) {
	n := &fakePage{}
	for _, i := range keep {
		n.pos = append(n.pos, p.pos[i])
	}
	n.size = p.size * len(keep) / max(len(p.pos), 1)
	return n, int64(n.size)
}
func (p *fakePage) Release() {
	if p.buf != nil {
		p.mem.Free(p.buf)
		p.buf = nil
	}
}

// belady counts the page loads of Belady's rule (evict the page needed
// farthest ahead) over seq with room for k pages: the fewest any cache of
// k pages can do without reading ahead.
func belady(seq []int, k int) int {
	loads := 0
	held := map[int]bool{}
	for i, p := range seq {
		if held[p] {
			continue
		}
		loads++
		if len(held) == k {
			victim, far := -1, -1
			for q := range held {
				next := len(seq) + q // never again: farthest, ties by page
				for j := i + 1; j < len(seq); j++ {
					if seq[j] == q {
						next = j
						break
					}
				}
				if next > far {
					victim, far = q, next
				}
			}
			delete(held, victim)
		}
		held[p] = true
	}
	return loads
}

// pageFuture is the future of a stream whose batch b pins graph i of page
// seq[b] (i = b mod per).
func pageFuture(src *fakeSource, seq []int) *Future {
	return NewFuture(src.pages, int64(src.pages*src.per), len(seq), func(b int, visit func(int, int64)) {
		visit(seq[b], int64(seq[b]*src.per+b%src.per))
	}, nil)
}

// With a stream's future registered, a cache of k pages whose pages hold
// one graph each (nothing to compact or trim) loads each page as often as
// Belady's rule does over the same order: the fewest a cache of that size
// allows. By recency, the same order over a set just larger than the
// cache loads at every step.
func TestForesightLoads(t *testing.T) {
	var seq []int
	for i := range 200 {
		seq = append(seq, i%5)
	}
	const size = 1 << 20
	run := func(foresee bool) int64 {
		src := &fakeSource{pages: 5, per: 1, size: size}
		c := New(src, 3*size+size/2, memory.NewGoAllocator())
		defer c.Close()
		var st *Stream
		if foresee {
			st = c.Foresee(pageFuture(src, seq), len(seq)) // no read ahead
			defer st.Close()
		}
		for b, p := range seq {
			if foresee {
				_, _, h, err := st.Pin(ctx, b, p, 0)
				if err != nil {
					t.Fatal(err)
				}
				h.Release(nil)
				st.ReleaseBatch(b)
				continue
			}
			_, _, h, err := c.Pin(ctx, p, 0)
			if err != nil {
				t.Fatal(err)
			}
			h.Release()
		}
		return c.Stats().Loads
	}
	min := belady(seq, 3)
	if got := run(true); got != int64(min) {
		t.Errorf("with the future: %d loads, Belady's rule %d", got, min)
	}
	if got := run(false); got != int64(len(seq)) {
		t.Errorf("by recency: %d loads, want the cliff: a load at each of the %d steps", got, len(seq))
	}
	if min >= len(seq)*3/5 {
		t.Errorf("Belady's rule loads %d times in %d steps: the order is not one where foresight helps", min, len(seq))
	}
}

// settle waits until the reads ahead started have loaded.
func settle(t *testing.T, c *Cache) Stats {
	t.Helper()
	c.prefetchers.Wait()
	return c.Stats()
}

// With a future, the first pin of batch b reads ahead the pages of batch
// b+ahead; a read ahead displaces only pages needed later than the one it
// reads, and a page no stream needs is not read ahead.
func TestForesightPrefetch(t *testing.T) {
	const size = 1 << 20
	src := &fakeSource{pages: 4, per: 1, size: size}
	c := New(src, 2*size+size/2, memory.NewGoAllocator())
	defer c.Close()
	seq := []int{0, 1, 0, 1, 2}
	st := c.Foresee(pageFuture(src, seq), 3)
	defer st.Close()
	// Batch 0 reads ahead batch 3's page 1 into the empty cache; batch 1
	// would read ahead batch 4's page 2, needed after 0 (at 2) and 1 (at
	// 3): no room.
	for b := range 2 {
		_, _, h, err := st.Pin(ctx, b, seq[b], 0)
		if err != nil {
			t.Fatal(err)
		}
		h.Release(nil)
		settle(t, c) // a load under way is not yet counted
	}
	if s := settle(t, c); s.Prefetches != 1 || s.Loads != 2 || s.Resident != 2 {
		t.Fatalf("want page 1 read ahead and page 2 not: %+v", s)
	}
	c.Prefetch(3) // never needed
	if s := settle(t, c); s.Prefetches != 1 {
		t.Fatalf("read ahead a page no stream needs: %+v", s)
	}
	for b := range 4 {
		st.ReleaseBatch(b) // 0 and 1 are past, and cooled
	}
	c.Prefetch(2)
	if s := settle(t, c); s.Prefetches != 2 || s.Loads != 3 || s.Resident != 2 {
		t.Fatalf("page 2, needed next, was not read ahead once 0 and 1 were past: %+v", s)
	}
}

// countCharge counts its Forget calls.
type countCharge struct {
	n      int64
	forgot *int
}

func (c countCharge) Bytes() int64 { return c.n }
func (c countCharge) Forget()      { *c.forgot++ }

// A charge counts in the limit with its page; over the limit it is shed
// first (the page kept while pinned), and forgotten with its page.
func TestChargeShedAndForget(t *testing.T) {
	src := &fakeSource{pages: 2, per: 2, size: 1000}
	c := New(src, 1500, memory.NewGoAllocator())
	defer c.Close()
	seq := []int{0, 0}
	st := c.Foresee(pageFuture(src, seq), 10)
	defer st.Close()
	forgot := 0
	_, _, h, err := st.Pin(ctx, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.Release(countCharge{400, &forgot})
	if s := c.Stats(); s.Used < 1400 || forgot != 0 {
		t.Fatalf("the charge was not counted, or forgotten under the limit: %+v, forgot %d", s, forgot)
	}
	_, _, h, err = st.Pin(ctx, 1, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	h.Release(countCharge{400, &forgot}) // 1800 > 1500: one charge shed
	if s := c.Stats(); s.Sheds != 1 || forgot != 2 || s.Resident != 1 {
		t.Fatalf("over the limit: %+v, forgot %d; want the page's charges shed, the page kept", s, forgot)
	}
}

// A reference model: streams of random batches over pages of several
// graphs, pinned by several goroutines under random limits with reads
// ahead, compaction and trims: every pin finds the graph it asked for,
// nothing pinned is held over the limit, and every charge is forgotten
// by Close.
func TestRandomStreams(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			src := &fakeSource{pages: 3 + rng.IntN(8), per: 1 + rng.IntN(6), size: 1000}
			limit := int64(500 + rng.IntN(5000))
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			c := New(src, limit, mem)
			graphs := src.pages * src.per
			nb := 5 + rng.IntN(40)
			batches := make([][]int64, nb)
			for b := range batches {
				for range 1 + rng.IntN(4) {
					batches[b] = append(batches[b], int64(rng.IntN(graphs)))
				}
			}
			f := NewFuture(src.pages, int64(graphs), nb, func(b int, visit func(int, int64)) {
				for _, pos := range batches[b] {
					visit(int(pos)/src.per, pos)
				}
			}, nil)
			st := c.Foresee(f, 1+rng.IntN(3))
			forgot, charged := 0, 0
			done := make(chan struct{})
			next := make(chan int)
			for range 3 {
				go func() {
					for b := range next {
						for _, pos := range batches[b] {
							pg, at, h, err := st.Pin(ctx, b, int(pos)/src.per, int(pos)%src.per)
							if err != nil {
								t.Error(err)
								return
							}
							if got := pg.(*fakePage).pos[at]; got != pos {
								t.Errorf("batch %d pinned position %d, got %d", b, pos, got)
							}
							h.Release(nil)
						}
						done <- struct{}{}
					}
				}()
			}
			for b := 0; b < nb; b += 2 {
				k := min(2, nb-b)
				for i := range k {
					next <- b + i
				}
				for range k {
					<-done
				}
				for i := range k {
					st.ReleaseBatch(b + i)
				}
				// A charge on a page pinned alone, as the loader's index.
				pos := batches[b][0]
				_, _, h, err := c.Pin(ctx, int(pos)/src.per, int(pos)%src.per)
				if err != nil {
					t.Fatal(err)
				}
				h.Release()
				// The futures' bytes are never dropped; the rest is.
				if s := c.Stats(); s.Used > max(limit, s.Futures) {
					t.Fatalf("after batch %d: %d bytes held, nothing pinned, limit %d: %+v", b, s.Used, limit, s)
				}
				charged++
				_, _, sh, err := st.Pin(ctx, -1, int(pos)/src.per, -1)
				if err != nil {
					t.Fatal(err)
				}
				sh.Release(countCharge{int64(rng.IntN(300)), &forgot})
			}
			close(next)
			st.Close()
			c.Close()
			if forgot != charged {
				t.Errorf("%d charges, %d forgotten by Close", charged, forgot)
			}
			mem.AssertSize(t, 0)
		})
	}
}

// gatedSource is a fakeSource whose loads wait for gate (or their ctx),
// each load announced on started.
type gatedSource struct {
	fakeSource
	gate    chan struct{}
	started chan struct{}
}

func (s *gatedSource) Load(ctx context.Context, p int, mem memory.Allocator) (Page, error) {
	s.started <- struct{}{}
	select {
	case <-s.gate:
		return s.fakeSource.Load(ctx, p, mem)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A load shared by several pins: the loader's caller going away (its ctx
// ended) fails no waiter, which then loads the page itself; a waiter whose
// own ctx ends stops waiting at once, while the load goes on.
func TestSharedLoadContexts(t *testing.T) {
	src := &gatedSource{fakeSource{pages: 1, per: 1, size: 100}, make(chan struct{}), make(chan struct{}, 4)}
	c := New(src, 1<<20, memory.NewGoAllocator())
	defer c.Close()
	first, cancelFirst := context.WithCancel(ctx)
	firstErr := make(chan error, 1)
	go func() {
		_, _, _, err := c.Pin(first, 0, 0)
		firstErr <- err
	}()
	<-src.started // the first pin is loading
	impatient, cancelImpatient := context.WithCancel(ctx)
	impatientErr := make(chan error, 1)
	go func() {
		_, _, _, err := c.Pin(impatient, 0, 0)
		impatientErr <- err
	}()
	waiterDone := make(chan error, 1)
	go func() {
		_, _, h, err := c.Pin(ctx, 0, 0)
		if err == nil {
			h.Release()
		}
		waiterDone <- err
	}()
	cancelImpatient()
	if err := <-impatientErr; err != context.Canceled {
		t.Fatalf("a waiter whose ctx ended: %v, want context.Canceled", err)
	}
	cancelFirst()
	if err := <-firstErr; err != context.Canceled {
		t.Fatalf("the loader whose ctx ended: %v", err)
	}
	<-src.started // the waiter loads the page itself
	close(src.gate)
	if err := <-waiterDone; err != nil {
		t.Fatalf("a waiter failed with the loader's ended ctx: %v", err)
	}
	if s := c.Stats(); s.Loads != 1 || s.Resident != 1 {
		t.Fatalf("%+v: want the waiter's load", s)
	}
}

// Close ends a read ahead that waits on a stalled store, at once.
func TestCloseEndsReadsAhead(t *testing.T) {
	src := &gatedSource{fakeSource{pages: 1, per: 1, size: 100}, make(chan struct{}), make(chan struct{}, 4)}
	c := New(src, 1<<20, memory.NewGoAllocator())
	c.Prefetch(0)
	<-src.started
	closeWithin(t, c, "a stalled read ahead")
}

// closeWithin closes c, failing the test when that takes over 10 s (it
// waits on what).
func closeWithin(t *testing.T, c *Cache, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Close waited on %s", what)
	}
}

// failingSource is a gatedSource whose loads fail with errStore once let
// through, counting them.
type failingSource struct {
	gatedSource
	loads atomic.Int64
}

var errStore = errors.New("the store answered 500")

func (s *failingSource) Load(ctx context.Context, p int, mem memory.Allocator) (Page, error) {
	s.loads.Add(1)
	if _, err := s.gatedSource.Load(ctx, p, mem); err != nil {
		return nil, err
	}
	return nil, errStore
}

// A load that fails, not by its context, fails its waiters with it: one
// read of the store, not one per waiter in turn (on fa5e656 three waiters
// of a stalled store waited three request timeouts).
func TestFailedLoadShared(t *testing.T) {
	src := &failingSource{gatedSource: gatedSource{fakeSource{pages: 1, per: 1, size: 100}, make(chan struct{}), make(chan struct{}, 8)}}
	c := New(src, 1<<20, memory.NewGoAllocator())
	defer c.Close()
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, _, _, err := c.Pin(ctx, 0, 0)
			errs <- err
		}()
	}
	<-src.started
	for deadline := time.Now().Add(10 * time.Second); ; { // the other two wait for this load
		c.mu.Lock()
		waiting := c.slots[0].ready.waiting
		c.mu.Unlock()
		if waiting == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pins wait for the load, want 2", waiting)
		}
		time.Sleep(time.Millisecond)
	}
	close(src.gate)
	for range 3 {
		if err := <-errs; !errors.Is(err, errStore) {
			t.Fatalf("a pin: %v, want the load's failure", err)
		}
	}
	if n := src.loads.Load(); n != 1 {
		t.Fatalf("%d loads of one failing page by three pins at once, want 1", n)
	}
	// The failure is not kept: a later pin reads again.
	if _, _, _, err := c.Pin(ctx, 0, 0); !errors.Is(err, errStore) || src.loads.Load() != 2 {
		t.Fatalf("a later pin: %v after %d loads", err, src.loads.Load())
	}
}

// Close ends a pin's load under way and waits for it: nothing it read is
// held after Close (on fa5e656 the page landed in the closed cache,
// Resident 1), and a pin after Close is refused.
func TestCloseEndsPinsLoads(t *testing.T) {
	src := &gatedSource{fakeSource{pages: 2, per: 1, size: 100}, make(chan struct{}), make(chan struct{}, 4)}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	c := New(src, 1<<20, mem)
	errc := make(chan error, 1)
	go func() {
		_, _, _, err := c.Pin(ctx, 0, 0)
		errc <- err
	}()
	<-src.started
	closeWithin(t, c, "a stalled pin's load")
	if err := <-errc; err == nil {
		t.Fatal("a pin whose load Close ended succeeded")
	}
	if s := c.Stats(); s.Resident != 0 || s.Used != 0 {
		t.Fatalf("after Close: %+v", s)
	}
	if _, _, _, err := c.Pin(ctx, 1, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("a pin after Close: %v, want ErrClosed", err)
	}
	if n := mem.CurrentAlloc(); n != 0 {
		t.Fatalf("%d bytes still allocated after Close", n)
	}
}
