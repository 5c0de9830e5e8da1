package pagecache

import (
	"context"
	"errors"
	"fmt"
)

// ErrClosed is a pin asked of a closed cache (a stream still running as
// its daemon stops).
var ErrClosed = errors.New("pagecache: closed")

// Pinning: the one path that loads a page, and the unpin that lets it go.

// Pin pins page p for its graph at index row (row < 0: the page alone)
// and returns the page and where it now holds that graph. The page stays
// valid until the handle's Release. A graph compacted away from a page
// that others pin is served by a private read of the page for this pin
// alone. A read or a wait for another's read gives up once ctx ends.
func (c *Cache) Pin(ctx context.Context, p, row int) (pg Page, at int, h Handle, err error) {
	s, err := c.acquire(ctx, p, row)
	if err != nil {
		return nil, 0, Handle{}, err
	}
	if row < 0 {
		return s.page, -1, Handle{c: c, p: int32(p)}, nil
	}
	if at := c.rowOf(s, row); at >= 0 {
		return s.page, int(at), Handle{c: c, p: int32(p)}, nil
	}
	c.unpin(p)
	return c.pinPrivate(ctx, p, row)
}

// A Handle is one pin; Release lets it go (once).
type Handle struct {
	c *Cache
	p int32
	// private is a private read's page and bytes (pinPrivate).
	private Page
	bytes   int64
}

// Release ends the pin.
func (h Handle) Release() {
	if h.private == nil {
		h.c.unpin(int(h.p))
		return
	}
	h.private.Release()
	h.c.mu.Lock()
	h.c.used -= h.bytes
	h.c.private--
	h.c.mu.Unlock()
}

// acquire pins page p, loading it when absent (one loader at a time per
// page: the others wait for it). row >= 0 asks for that row too: a page
// compacted without it and pinned by none is read again whole. A load
// that fails leaves the page absent; its waiters share its failure,
// unless it ended by its own context (its caller went away, which fails
// no other): then each tries in turn under its own ctx. A closed cache
// refuses (ErrClosed), and a load under way as it closes ends with it:
// Close waits for it, and its page is not kept.
//
// A panic anywhere in it (a bug: the page's bytes are checked, and their
// decoding recovers) leaves mu unlocked and the page's waiters released,
// so a worker that recovers it does not hang every later reader.
func (c *Cache) acquire(ctx context.Context, p, row int) (_ *slot, err error) {
	c.mu.Lock()
	locked := true
	defer func() {
		if locked {
			c.mu.Unlock()
		}
	}()
	unlock := func() { locked = false; c.mu.Unlock() }
	lock := func() { c.mu.Lock(); locked = true }
	for {
		if c.closed {
			return nil, ErrClosed
		}
		s := &c.slots[p]
		if s.loaded && row >= 0 && s.pins == 0 && c.rowOf(s, row) < 0 {
			c.drop(p)
			continue
		}
		if s.loaded {
			c.unlink(p)
			s.pins++
			s.cold = false
			return s, nil
		}
		if ld := s.ready; ld != nil { // another goroutine is loading it
			ld.waiting++
			unlock()
			select {
			case <-ld.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if ld.err != nil && !ld.byContext {
				return nil, ld.err
			}
			lock()
			continue
		}
		ld := &loading{done: make(chan struct{})}
		s.ready = ld
		c.loading.Add(1)
		unlock()
		pg, bytes, est := c.loadGuarded(ctx, p, s, ld, &err)
		lock()
		c.loading.Done()
		if err = c.closedAfter(pg, err); err != nil {
			ld.err = err
			ld.byContext = ctx.Err() != nil && !errors.Is(err, ErrClosed)
			s.ready = nil
			close(ld.done)
			return nil, err
		}
		close(ld.done)
		s.page, s.loaded = pg, true
		s.bytes = bytes
		c.used += s.bytes
		c.decoded += s.bytes
		c.estimated += est
		c.loads.Add(1)
		c.resident++
		s.pins++
		c.notePeak()
		c.evictLocked()
		return s, nil
	}
}

// loading is a page's load under way: done closes once it ended, then err
// is its failure (nil once loaded), byContext whether it ended by its
// loader's own context. waiting counts the pins that waited for it (under
// mu; the tests read it to know a failure is shared, not raced).
type loading struct {
	done      chan struct{}
	err       error
	byContext bool
	waiting   int
}

// loadGuarded reads page p for acquire, outside mu. Should it panic, it
// clears the slot's loading mark and releases its waiters (under mu)
// before the panic goes on.
//
// The read ends with ctx or with the cache's Close, whichever first.
func (c *Cache) loadGuarded(ctx context.Context, p int, s *slot, ld *loading, err *error) (pg Page, bytes, est int64) {
	done := false
	defer func() {
		if !done {
			c.mu.Lock()
			s.ready = nil
			ld.err, ld.byContext = fmt.Errorf("pagecache: page %d: the load panicked", p), true
			close(ld.done)
			c.loading.Done()
			c.mu.Unlock()
		}
	}()
	var n int64
	pg, n, *err = c.read(ctx, p)
	est = c.src.Estimate(p) // outside mu: the first call may read an index
	done = true
	return pg, n, est
}

// read loads page p from the source, outside mu, under ctx and the
// cache's life: the read ends with ctx or with Close, whichever first. n
// is the page's decoded bytes.
func (c *Cache) read(ctx context.Context, p int) (pg Page, n int64, err error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	alloc := &countingAlloc{Allocator: c.mem}
	pg, err = c.src.Load(rctx, p, alloc)
	return pg, alloc.n.Load(), err
}

// closedAfter is a load's outcome once it is back under mu: a cache
// closed meanwhile keeps nothing it read (the page is released) and
// refuses with ErrClosed, whatever the read's own end (Close cancels it).
func (c *Cache) closedAfter(pg Page, err error) error {
	if !c.closed {
		return err
	}
	if err == nil {
		pg.Release()
	}
	return ErrClosed
}

func (c *Cache) unpin(p int) {
	c.mu.Lock()
	s := &c.slots[p]
	if s.pins--; s.pins == 0 {
		if s.cold {
			c.push(&c.cold, p)
		} else {
			c.push(&c.warm, p)
		}
	}
	c.evictLocked()
	c.mu.Unlock()
}

// pinPrivate serves row of page p, compacted away from the page while
// others pin it, by a private read of the page for this pin alone.
// Waiting for the other pins to go could wait on this worker's own; the
// read is counted in the cache's use while held instead, so cooler pages
// make room.
//
// Like acquire's, the read is refused by a closed cache, ends with its
// Close, and is waited for by it.
func (c *Cache) pinPrivate(ctx context.Context, p, row int) (Page, int, Handle, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, 0, Handle{}, ErrClosed
	}
	c.loading.Add(1)
	c.mu.Unlock()
	pg, n, err := c.read(ctx, p)
	c.mu.Lock()
	c.loading.Done()
	if err = c.closedAfter(pg, err); err != nil {
		c.mu.Unlock()
		return nil, 0, Handle{}, err
	}
	c.used += n
	c.private++
	c.notePeak()
	c.evictLocked()
	c.mu.Unlock()
	c.loads.Add(1)
	return pg, row, Handle{c: c, p: int32(p), private: pg, bytes: n}, nil
}
